package core

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is the field manager of every write the CLI makes; the guard
// records it as the VIA of a revision.
const FieldManager = "rollout"

// Exit codes of the CLI.
const (
	// ExitOK: the command did what was asked, or there was nothing to do
	// ("already paused", "skipped rollback: already at revision N").
	ExitOK = 0
	// ExitError: anything else: a bad argument, an object or template not
	// found, a paused or topology-managed object, a live change of an
	// object a GitOps controller manages or an undo to a revision of
	// unknown author (without --force), a refusal by the policy or the
	// guard, a conflict that could not be resolved, a
	// denied permission, an unreachable API server.
	ExitError = 1
	// ExitRefused: rollout-guard's policy (checked by the CLI before
	// sending), an admission webhook or a ValidatingAdmissionPolicy refused
	// the change; nothing was changed.
	ExitRefused = 6
	// ExitNotConfirmed: a change that replaces machines needs a
	// confirmation (--yes, or yes at the terminal) and did not get it;
	// nothing was changed.
	ExitNotConfirmed = 10
)

// Options configure the command tree.
type Options struct {
	// IOStreams are where the commands read and write.
	IOStreams genericiooptions.IOStreams
	// ConfigFlags are the kubectl connection flags (--kubeconfig, --context,
	// -n, ...). Default: genericclioptions.NewConfigFlags(true).
	ConfigFlags *genericclioptions.ConfigFlags
	// Now is the clock: restart times and the AGE of history. Default:
	// time.Now.
	Now func() time.Time
	// Version is printed by `rollout version`.
	Version string
	// DisplayName is the command's name in help and in the default
	// change-cause, e.g. "kubectl capi rollout" when run as a kubectl
	// plugin. Default: "rollout".
	DisplayName string
	// BeforeWrite, when set, is called with the object read from the API
	// server just before each write is sent, after every check. It lets
	// tests interleave a concurrent change; an error stops the write.
	BeforeWrite func(ctx context.Context, obj client.Object) error
	// Terminal, when set, reports whether a person answers at a terminal
	// (the restart of a control plane asks first). Default: whether stdin
	// and stderr are terminals.
	Terminal func() bool
}

// Session is the state shared by the commands of one invocation.
type Session struct {
	Options
	// Args is the command line (without the program name), for the default
	// change-cause.
	Args []string

	// Connect makes the API clients (see Clients); nil connects through
	// the kubeconfig flags.
	Connect func() (*Clients, error)
	once    sync.Once
	cls     *Clients
	clsErr  error

	// warnMu guards captured and capturing.
	warnMu sync.Mutex
	// capturing sends the API server's warnings to captured instead of
	// stderr (plan shows them in its report).
	capturing bool
	captured  []string
}

// warningHandler prints the API server's warnings on stderr, as kubectl
// does, or captures them while the CLI collects them.
type warningHandler struct {
	// Session captures the warnings while it collects them.
	Session *Session
	print   rest.WarningHandler
}

// HandleWarningHeader implements rest.WarningHandler.
func (h warningHandler) HandleWarningHeader(code int, agent, text string) {
	h.Session.warnMu.Lock()
	if h.Session.capturing {
		if code == 299 && text != "" {
			h.Session.captured = append(h.Session.captured, text)
		}
		h.Session.warnMu.Unlock()
		return
	}
	h.Session.warnMu.Unlock()
	h.print.HandleWarningHeader(code, agent, text)
}

// CollectWarnings runs fn and returns the API server's warnings to its
// requests instead of printing them.
func (c *Session) CollectWarnings(fn func() error) ([]string, error) {
	c.warnMu.Lock()
	c.capturing, c.captured = true, nil
	c.warnMu.Unlock()
	err := fn()
	c.warnMu.Lock()
	defer c.warnMu.Unlock()
	c.capturing = false
	return c.captured, err
}

// Clients are the API clients of one invocation.
type Clients struct {
	// Client reads, writes and watches the typed objects; its RESTMapper
	// is mapper.
	Client client.WithWatch
	// Mapper resolves kinds through the API server's discovery.
	Mapper meta.RESTMapper
	// Namespace is the namespace of the command (-n or the kubeconfig's).
	Namespace string
	// Config is the connection Client was made from, for what needs a
	// client of its own (plan's run of Cluster API's topology reconciler);
	// nil when the clients were given (Options.Connect).
	Config *rest.Config
}

// Clients returns the invocation's API clients, connecting once: through
// connect when set (tests give clients over a fake), else to the API
// server of the kubeconfig flags.
func (c *Session) Clients() (*Clients, error) {
	c.once.Do(func() {
		connect := c.Connect
		if connect == nil {
			connect = c.connectKubeconfig
		}
		c.cls, c.clsErr = connect()
	})
	return c.cls, c.clsErr
}

// connectKubeconfig connects to the API server the kubeconfig flags name.
func (c *Session) connectKubeconfig() (*Clients, error) {
	cfg, err := c.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = warningHandler{Session: c, print: rest.NewWarningWriter(c.IOStreams.ErrOut, rest.WarningWriterOptions{Deduplicate: true})}
	cfg.UserAgent = "rollout-guard-cli"
	mapper, err := c.ConfigFlags.ToRESTMapper()
	if err != nil {
		return nil, fmt.Errorf("discovering the API server's kinds: %w", err)
	}
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: Scheme(), Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("connecting to the API server: %w", err)
	}
	ns, _, err := c.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	return &Clients{Client: cl, Mapper: mapper, Namespace: ns, Config: cfg}, nil
}

// Now is the invocation's clock: Options.Now when set, else time.Now.
func (c *Session) Now() time.Time {
	if c.Options.Now != nil {
		return c.Options.Now()
	}
	return time.Now()
}

// Warnf prints a warning to stderr, as kubectl prints the API server's.
func (c *Session) Warnf(format string, args ...any) {
	fmt.Fprintf(c.IOStreams.ErrOut, "Warning: "+format+"\n", args...)
}

// Notef prints a line of information to stderr.
func (c *Session) Notef(format string, args ...any) {
	fmt.Fprintf(c.IOStreams.ErrOut, format+"\n", args...)
}

// Name is the command's name in help and messages: Options.DisplayName,
// else "rollout".
func (c *Session) Name() string {
	if c.DisplayName != "" {
		return c.DisplayName
	}
	return "rollout"
}

// ExitCode maps the error of a command to the CLI's exit code: ExitOK for
// nil, ExitError otherwise.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	return ExitError
}

// ChangeCause is the change-cause a write carries: --change-cause when
// given, else the command line without its connection flags (--kubeconfig,
// --context, -n, --token, --as, ...), which say nothing about the change and
// may hold secrets, and without --yes.
func (c *Session) ChangeCause(cmd *cobra.Command, explicit string) string {
	if cmd.Flags().Changed("change-cause") {
		return explicit
	}
	args := c.Args
	if args == nil && len(os.Args) > 1 {
		args = os.Args[1:]
	}
	conn := pflag.NewFlagSet("connection", pflag.ContinueOnError)
	genericclioptions.NewConfigFlags(false).AddFlags(conn)
	words := []string{c.Name()}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			words = append(words, quoteAll(args[i:])...)
			break
		}
		if a == "--yes" || a == "-y" || strings.HasPrefix(a, "--yes=") {
			continue // the confirmation says nothing about the change
		}
		if f, inline, ok := connectionFlag(conn, a); ok {
			if !inline && f.Value.Type() != "bool" && i+1 < len(args) {
				i++ // its value
			}
			continue
		}
		words = append(words, Quote(a))
	}
	return strings.Join(words, " ")
}

// connectionFlag reports whether arg is a flag of set, and whether its value
// is in arg itself.
func connectionFlag(set *pflag.FlagSet, arg string) (*pflag.Flag, bool, bool) {
	switch {
	case strings.HasPrefix(arg, "--"):
		name, _, inline := strings.Cut(arg[2:], "=")
		if f := set.Lookup(name); f != nil {
			return f, inline, true
		}
	case strings.HasPrefix(arg, "-") && len(arg) >= 2:
		if f := set.ShorthandLookup(arg[1:2]); f != nil {
			return f, len(arg) > 2, true
		}
	}
	return nil, false, false
}

func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = Quote(a)
	}
	return out
}

// Quote writes an argument so that a shell reads it back as one word.
func Quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// options is the kubectl pattern every verb follows: read the arguments,
// check the flags, then act.
type options interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// RunE runs o's three steps as a cobra command's RunE.
func RunE(o options) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd.Context())
	}
}

// The exit-status lines of the commands' help, one per outcome; each
// command lists those it can end with (SetExitStatus).
const (
	// ExitHelpOK is ExitOK's line.
	ExitHelpOK = `  0   done, or nothing to do`
	// ExitHelpError is ExitError's line for the commands that only read.
	ExitHelpError = `  1   error: bad arguments, object not found, permission denied, API server unreachable`
	// ExitHelpChangeError is ExitError's line for the commands that change
	// an object.
	ExitHelpChangeError = `  1   error: bad arguments, not found, a paused, topology- or GitOps-managed object,
      conflict, permission denied, API server or rollout-guard unreachable`
	// ExitHelpRefused is ExitRefused's line.
	ExitHelpRefused = `  6   refused by rollout-guard's policy or by admission (a webhook, an admission policy);
      nothing was changed`
	// ExitHelpNotConfirmed is ExitNotConfirmed's line.
	ExitHelpNotConfirmed = `  10  not confirmed: a restart that replaces machines needs --yes without a terminal;
      nothing was changed`
)

// ExitStatusAnnotation holds a command's exit-status block, which its help
// prints after the flags.
const ExitStatusAnnotation = "rollout-guard.io/exit-status"

// SetExitStatus gives cmd's help its exit-status block: lines, one per
// exit code the command can end with.
func SetExitStatus(cmd *cobra.Command, lines ...string) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[ExitStatusAnnotation] = "Exit status:\n" + strings.Join(lines, "\n")
}
