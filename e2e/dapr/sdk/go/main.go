// The Go SDK side of the jobsd SDK matrix (e2e/dapr/sdk.sh): github.com/dapr/go-sdk, unchanged,
// as an app (jobs-app, actor-app) and as a client (client). One binary, three commands.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sdkmatrix jobs-app|actor-app|client [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "jobs-app":
		jobsApp(os.Args[2:])
	case "actor-app":
		actorApp(os.Args[2:])
	case "client":
		os.Exit(client(os.Args[2:]))
	default:
		fmt.Fprintln(os.Stderr, "unknown command", os.Args[1])
		os.Exit(2)
	}
}
