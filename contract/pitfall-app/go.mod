module uds-lab/pitfall-app

go 1.26.8
