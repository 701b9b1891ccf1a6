module github.com/goredisson/locks

go 1.25.0

require (
	github.com/google/uuid v1.6.0
	github.com/redis/rueidis v1.0.79
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
