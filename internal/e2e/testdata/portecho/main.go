// Command portecho is a server an engineer might start in a sandbox, for
// the forward test: it listens on the port given, on every address, says
// so on standard output, and for each connection writes a greeting line
// and then echoes what it reads until the client half-closes.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: portecho PORT")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", ":"+os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	host, _ := os.Hostname()
	fmt.Printf("listening on %s\n", ln.Addr())
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		go func() {
			defer c.Close()
			fmt.Fprintf(c, "portecho on %s\n", host)
			_, _ = io.Copy(c, c)
		}()
	}
}
