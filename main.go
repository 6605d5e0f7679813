// Command skein is the peer-to-peer GPU cluster agent and its command line.
package main

import (
	"os"

	"github.com/skein-dev/skein/cli"
)

func main() { os.Exit(cli.Run(os.Args)) }
