// Command etcd is the upstream etcd server, built from go.etcd.io/etcd/server
// for the local API server used by tests and the sandbox.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
