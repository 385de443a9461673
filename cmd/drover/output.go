package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// outputFormat is the value of --output: how a command prints its data.
type outputFormat string

const (
	outputText outputFormat = "text"
	outputJSON outputFormat = "json"
)

var outputFormats = []string{string(outputText), string(outputJSON)}

func (o *outputFormat) String() string { return string(*o) }
func (o *outputFormat) Type() string   { return "text|json" }

func (o *outputFormat) Set(s string) error {
	switch f := outputFormat(s); f {
	case outputText, outputJSON:
		*o = f
		return nil
	}
	return fmt.Errorf("%q is not an output format; use text or json", s)
}

// output is the --output flag of a command that prints data, with the hidden
// --json alias where the command had it before --output.
type output struct {
	format outputFormat
	json   bool
}

// addOutputFlags gives c the --output (-o) flag and, with jsonAlias, the
// hidden --json that means --output json.
func addOutputFlags(c *cobra.Command, jsonAlias bool) *output {
	o := &output{format: outputText}
	c.Flags().VarP(&o.format, "output", "o", "print as text or json")
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
	if jsonAlias {
		c.Flags().BoolVar(&o.json, "json", false, "same as --output json")
		_ = c.Flags().MarkHidden("json")
		c.PreRunE = func(c *cobra.Command, _ []string) error {
			if o.json && o.format != outputJSON && c.Flags().Changed("output") {
				return usageErrorf(c, "--json means --output json; it contradicts --output %s", o.format)
			}
			return nil
		}
	}
	return o
}

// isJSON reports whether the command prints JSON.
func (o *output) isJSON() bool { return o.json || o.format == outputJSON }

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
