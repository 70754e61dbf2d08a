package main

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// usageTemplate is every command's usage: its synopsis, examples, the
// subcommands by group, then its own flags apart from the connection
// flags every Temporal command shares.
const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} COMMAND [flags]{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}{{$cmds := .Commands}}{{if eq (len .Groups) 0}}

Commands:{{range $cmds}}{{if .IsAvailableCommand}}
  {{rpad .Name .NamePadding}} {{.Short}}{{end}}{{end}}{{else}}{{range $group := .Groups}}

{{.Title}}{{range $cmds}}{{if and (eq .GroupID $group.ID) (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding}} {{.Short}}{{end}}{{end}}{{end}}{{end}}{{end}}{{with commandFlags .}}

Flags:
{{.}}{{end}}{{with connectionFlags .}}

Connection flags (default: the standard Temporal client environment):
{{.}}{{end}}{{if .HasAvailableSubCommands}}

Run "{{.CommandPath}} COMMAND -h" for a command's flags and examples.{{end}}
`

func init() {
	cobra.AddTemplateFunc("commandFlags", func(c *cobra.Command) string { return flagUsages(c, false) })
	cobra.AddTemplateFunc("connectionFlags", func(c *cobra.Command) string { return flagUsages(c, true) })
}

// flagUsages lists c's connection flags, or its other flags.
func flagUsages(c *cobra.Command, connection bool) string {
	fs := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		if slices.Contains(clientFlagNames, f.Name) == connection {
			fs.AddFlag(f)
		}
	})
	return strings.TrimRight(fs.FlagUsages(), " \n")
}
