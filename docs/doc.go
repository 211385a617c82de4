// Package docs holds the user documentation of rollout-guard, a book whose
// table of contents is docs/README.md, and the code that keeps it true: the
// CLI reference under docs/reference/cli is generated from the rollout
// command tree (CLIReference; `make docs` writes it, a test fails when it is
// stale), and a test checks that every relative link and #anchor of docs/
// and of the repository's README.md resolves.
package docs
