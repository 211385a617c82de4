package docs

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/rollout-guard/rollout-guard/rollout"
)

// CLIReferenceDir is where the generated CLI reference lives, relative to
// the repository's root.
const CLIReferenceDir = "docs/reference/cli"

// generatedHeader opens every generated page, so that nobody edits one by
// hand: the next `make docs` would undo it.
const generatedHeader = "<!-- Generated from the rollout command tree by `make docs`; do not edit. -->\n\n"

// CLIReference renders the reference of the rollout CLI: one Markdown page
// per command (cobra's doc generator: synopsis, usage, examples, flags,
// the connection flags inherited from the root, links to the parent and
// children), each with its exit status, keyed by file name (rollout.md,
// rollout_status.md, ...). It builds the command tree as the binary does,
// without a kubectl plugin name, and renders it in memory, so that a test
// can compare it with the pages checked in.
func CLIReference() (map[string][]byte, error) {
	root := rollout.NewCommand(rollout.Options{IOStreams: genericiooptions.NewTestIOStreamsDiscard()})
	// kubectl's --cache-dir defaults to a directory under the home of
	// whoever runs the generator: name it as a user would read it.
	if f := root.PersistentFlags().Lookup("cache-dir"); f != nil {
		f.DefValue = "$HOME/.kube/cache"
	}
	pages := map[string][]byte{}
	var walk func(cmd *cobra.Command) error
	walk = func(cmd *cobra.Command) error {
		if !cmd.IsAvailableCommand() && cmd.HasParent() {
			return nil
		}
		cmd.DisableAutoGenTag = true
		var buf bytes.Buffer
		if err := doc.GenMarkdownCustom(cmd, &buf, func(name string) string { return name }); err != nil {
			return fmt.Errorf("rendering %q: %w", cmd.CommandPath(), err)
		}
		page := withExitStatus(buf.String(), cmd.Annotations[rollout.ExitStatusAnnotation])
		name := strings.ReplaceAll(cmd.CommandPath(), " ", "_") + ".md"
		pages[name] = []byte(generatedHeader + page)
		for _, child := range cmd.Commands() {
			if err := walk(child); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	return pages, nil
}

// withExitStatus puts a command's exit-status block (the annotation's text,
// "Exit status:" then one line per code) into its page, before the links
// to other commands.
func withExitStatus(page, status string) string {
	_, codes, ok := strings.Cut(status, "\n")
	if !ok {
		return page
	}
	section := "### Exit status\n\n```\n" + codes + "\n```\n\n"
	if before, after, found := strings.Cut(page, "### SEE ALSO"); found {
		return before + section + "### SEE ALSO" + after
	}
	return page + "\n" + section
}

// CLIReferencePath is the path of a generated page, relative to the
// repository's root.
func CLIReferencePath(name string) string { return path.Join(CLIReferenceDir, name) }
