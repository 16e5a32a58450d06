// Command echoserver is the editor's server of the forwarding tests
// (internal/e2e): copied into a sandbox over scp and started over ssh, as
// VS Code Remote-SSH and JetBrains Gateway start theirs, it listens on a
// loopback TCP address and on a unix socket. Each connection is greeted
// with a line naming the listener, then has its lines echoed back.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
)

func main() {
	tcp := flag.String("tcp", "", "a TCP address to listen on, such as 127.0.0.1:7001")
	unix := flag.String("unix", "", "a unix socket path to listen on")
	flag.Parse()
	done := make(chan error)
	for network, addr := range map[string]string{"tcp": *tcp, "unix": *unix} {
		if addr == "" {
			continue
		}
		if network == "unix" {
			os.Remove(addr) // the one an earlier run left
		}
		l, err := net.Listen(network, addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("listening on %s %s\n", network, addr)
		go func() { done <- serve(l, network+" "+addr) }()
	}
	fmt.Fprintln(os.Stderr, <-done)
	os.Exit(1)
}

func serve(l net.Listener, name string) error {
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			fmt.Fprintf(c, "hello from %s\n", name)
			s := bufio.NewScanner(c)
			for s.Scan() {
				fmt.Fprintf(c, "%s\n", s.Text())
			}
		}()
	}
}
