// Command etcd is the upstream etcd server, built from etcdmain so no release
// binary is ever downloaded.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
