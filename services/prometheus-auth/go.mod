module uds-lab/prometheus-auth

go 1.26.8

require (
	golang.org/x/crypto v0.57.0
	gopkg.in/yaml.v3 v3.0.1
)
