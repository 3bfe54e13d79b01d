// Command etcd is etcd's own server (go.etcd.io/etcd/server/v3's etcdmain),
// built from the Go module proxy at the version go.mod pins: etcd's module
// cannot be installed with go install (its go.mod has replace lines), so
// this main of ours requires it instead. tests/k8s runs it under a real
// kube-apiserver (scripts/test-deps.sh k8s-server builds both).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
