// Command icehold is the operator CLI and the local all-in-one server.
package main

import (
	"fmt"
	"os"
)

const usage = `icehold: the table-lifecycle Iceberg REST catalog

usage:
  icehold local [flags]                 run the whole product on this machine (make run)
  icehold invoke FUNCTION EVENT.json    run a function's handler on a sample event (make invoke)
  icehold local redrive                 move the local delete DLQ back to its queue (the console's redrive)
  icehold local token add|list|revoke   local bearer tokens (a running server sees changes at once)
  icehold jobs list|show|watch          purge jobs (watch draws a progress bar)
  icehold tables soft-deleted|undrop|purge-now|legal-hold   soft-deleted tables
  icehold partitions drop NAMESPACE.TABLE --partition k=v,…   end partitions in one snapshot
  icehold retention set|show|clear NAMESPACE.TABLE            partition retention (set: --field --keep)
  icehold tables verify NAMESPACE.TABLE                       check a table's lifecycle invariants
  icehold migrate ownership --table T   claim the locations of what predates the ownership index (AWS)

run "icehold local -h" for its flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "local":
		if len(os.Args) > 2 && os.Args[2] == "redrive" {
			err = runRedrive(os.Args[3:])
		} else if len(os.Args) > 2 && os.Args[2] == "token" {
			err = runToken(os.Args[3:], os.Stdout, os.Stderr)
		} else {
			err = runLocal(os.Args[2:])
		}
	case "jobs":
		err = runJobs(os.Args[2:], os.Stdout)
	case "invoke":
		err = runInvoke(os.Args[2:])
	case "tables":
		if len(os.Args) > 2 && os.Args[2] == "verify" {
			err = runVerify(os.Args[3:], os.Stdout)
		} else {
			err = runTables(os.Args[2:], os.Stdout)
		}
	case "retention":
		err = runRetention(os.Args[2:], os.Stdout)
	case "partitions":
		err = runPartitions(os.Args[2:], os.Stdout)
	case "migrate":
		err = runMigrate(os.Args[2:], os.Stdout)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "icehold: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "icehold:", err)
		os.Exit(1)
	}
}
