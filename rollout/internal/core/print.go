package core

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
)

// PrintFlags is the -o/--output flag of the commands whose output is data:
// json, yaml or name, through cli-runtime's JSON/YAML and name printers.
// (cli-runtime's full PrintFlags also registers go-template flags, among them
// --template, which is the template switch's own flag here.)
type PrintFlags struct {
	// JSONYaml prints -o json and -o yaml.
	JSONYaml *genericclioptions.JSONYamlPrintFlags
	// Name prints -o name, and "KIND/NAME <operation>" without -o.
	Name *genericclioptions.NamePrintFlags
	// Output is the value of -o.
	Output string
}

// NewPrintFlags returns print flags with nothing set.
func NewPrintFlags() *PrintFlags {
	return &PrintFlags{
		JSONYaml: genericclioptions.NewJSONYamlPrintFlags(),
		Name:     genericclioptions.NewNamePrintFlags(""),
	}
}

// AddFlags registers -o/--output and --show-managed-fields.
func (f *PrintFlags) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.Output, "output", "o", "", "Output format: json, yaml or name.")
	f.JSONYaml.AddFlags(cmd)
}

// Validate checks the output format.
func (f *PrintFlags) Validate() error {
	switch strings.ToLower(f.Output) {
	case "", "json", "yaml", "name":
		return nil
	}
	return fmt.Errorf("unknown output format %q: use -o json, -o yaml or -o name", f.Output)
}

// Data reports whether the output is data (json, yaml or name) rather than
// messages for people.
func (f *PrintFlags) Data() bool { return f.Output != "" }

// ToPrinter returns the printer of the chosen format; without -o it prints
// "KIND.GROUP/NAME <operation>", as kubectl does.
func (f *PrintFlags) ToPrinter(operation string) (printers.ResourcePrinter, error) {
	format := strings.ToLower(f.Output)
	var p printers.ResourcePrinter
	switch format {
	case "json", "yaml":
		jp, err := f.JSONYaml.ToPrinter(format)
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", format, err)
		}
		p = jp
	default:
		f.Name.Operation = operation
		np, err := f.Name.ToPrinter(format)
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", f.Output, err)
		}
		p = np
	}
	return printers.NewTypeSetter(Scheme()).ToPrinter(p), nil
}
