package rollout

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/klog/v2"

	"github.com/rollout-guard/rollout-guard/rollout/history"
	"github.com/rollout-guard/rollout-guard/rollout/internal/core"
	"github.com/rollout-guard/rollout-guard/rollout/plan"
	"github.com/rollout-guard/rollout-guard/rollout/status"
)

// NewCommand returns the `rollout` command tree. Execute runs it.
func NewCommand(o core.Options) *cobra.Command {
	return newRoot(&core.Session{Options: o})
}

func newRoot(c *core.Session) *cobra.Command {
	if c.ConfigFlags == nil {
		c.ConfigFlags = genericclioptions.NewConfigFlags(true)
	}
	if c.IOStreams.Out == nil {
		c.IOStreams.Out = io.Discard
	}
	if c.IOStreams.ErrOut == nil {
		c.IOStreams.ErrOut = io.Discard
	}
	root := newSwitchCommand(c)
	root.SetUsageTemplate(usageTemplate)
	root.SuggestionsMinimumDistance = 2
	root.SilenceErrors = true
	root.SilenceUsage = true
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetOut(c.IOStreams.Out)
	root.SetErr(c.IOStreams.ErrOut)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{cmd: cmd, err: err}
	})
	c.ConfigFlags.AddFlags(root.PersistentFlags())
	root.AddCommand(
		newRestartCommand(c),
		newPauseCommand(c),
		newResumeCommand(c),
		history.NewCommand(c),
		newUndoCommand(c),
		status.NewCommand(c),
		plan.NewCommand(c),
		newVersionCommand(c),
	)
	if c.DisplayName != "" {
		// Run as a kubectl plugin: help names the command as it was typed.
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: c.DisplayName}
		for _, cmd := range append(root.Commands(), root) {
			cmd.Example = strings.ReplaceAll(cmd.Example, "  rollout ", "  "+c.DisplayName+" ")
		}
	}
	return root
}

// usageTemplate is cobra's, with the examples first, the command's own flags
// and its exit status; the connection flags every command shares
// (kubectl's --kubeconfig, -n, ...) are listed in full by the root command
// only.
const usageTemplate = `{{if .HasExample}}Examples:
{{.Example}}

{{end}}Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .LocalNonPersistentFlags.HasAvailableFlags}}

Flags:
{{.LocalNonPersistentFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{with index .Annotations "` + core.ExitStatusAnnotation + `"}}

{{.}}{{end}}{{if not .HasParent}}

Connection Flags:
{{.PersistentFlags.FlagUsages | trimTrailingWhitespaces}}{{else if .HasAvailableInheritedFlags}}

Connection flags (--kubeconfig, --context, -n/--namespace, --as, --token, ...): see {{.Root.CommandPath}} --help.{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

// usageError is a mistake on the command line; its message points to --help.
type usageError struct {
	cmd *cobra.Command
	err error
}

// Error is the mistake and a pointer to --help.
func (e usageError) Error() string {
	return fmt.Sprintf("%v\nSee '%s --help' for usage.", e.err, e.cmd.CommandPath())
}

// Unwrap returns the mistake.
func (e usageError) Unwrap() error { return e.err }

// Execute runs the command line args (without the program name) and returns
// the exit code; errors are printed to o.IOStreams.ErrOut as "error: ...".
func Execute(ctx context.Context, o core.Options, args []string) int {
	// client-go logs some failures through klog as well as returning them;
	// the CLI reports every error itself, once.
	klog.SetLogger(logr.Discard())
	c := &core.Session{Options: o, Args: args}
	root := newRoot(c)
	if versionAsked(args, root.PersistentFlags()) {
		// --version is also the template switch's flag, which takes a value:
		// alone, it asks for the CLI's version, as `rollout version` does.
		args = []string{"version"}
	}
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	PrintError(c.IOStreams.ErrOut, err)
	return core.ExitCode(err)
}

// PrintError prints the error of a command on w: "error: ..." for a
// failure, the message alone for a verdict (plan --fail-on-replace, status
// not yet rolled out); nothing for nil.
func PrintError(w io.Writer, err error) {
	switch {
	case err == nil:
	case core.IsVerdict(err):
		fmt.Fprintf(w, "%v\n", err)
	default:
		fmt.Fprintf(w, "error: %v\n", err)
	}
}

// PluginDisplayName returns the name a kubectl plugin is invoked by, from
// the name of its executable: "kubectl-capi-rollout" is `kubectl capi
// rollout`, "kubectl-capi_rollout" is `kubectl capi-rollout` (kubectl reads
// "-" as a space and "_" as a dash). It returns "" for any other name.
func PluginDisplayName(executable string) string {
	base := filepath.Base(executable)
	rest, ok := strings.CutPrefix(base, "kubectl-")
	if !ok || rest == "" {
		return ""
	}
	words := strings.Split(rest, "-")
	for i, w := range words {
		words[i] = strings.ReplaceAll(w, "_", "-")
	}
	return "kubectl " + strings.Join(words, " ")
}

// versionAsked reports whether args are `--version` with no resource and
// no value: every other argument is a flag of flags (the root's persistent
// ones: --kubeconfig, --context, -n…), with its value when it takes one
// (--kubeconfig FILE or --kubeconfig=FILE).
func versionAsked(args []string, flags *pflag.FlagSet) bool {
	asked := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--version" {
			asked = true
			continue
		}
		var f *pflag.Flag
		switch {
		case strings.HasPrefix(a, "--"):
			name, _, hasValue := strings.Cut(a[2:], "=")
			if f = flags.Lookup(name); f == nil {
				return false
			}
			if hasValue {
				continue
			}
		case strings.HasPrefix(a, "-") && len(a) == 2:
			if f = flags.ShorthandLookup(a[1:]); f == nil {
				return false
			}
		default:
			return false
		}
		if f.NoOptDefVal == "" { // the flag takes the next argument as its value
			i++
		}
	}
	return asked
}

func newVersionCommand(c *core.Session) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of the rollout CLI",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := c.Version
			if v == "" {
				v = "dev"
			}
			_, err := fmt.Fprintln(c.IOStreams.Out, v)
			return err
		},
	}
}
