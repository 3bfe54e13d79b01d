module uds-lab/floor

go 1.26.8
