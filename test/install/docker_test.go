package install

import (
	"bufio"
	"bytes"
	"debug/elf"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dockerfile is the parsed Dockerfile: its instructions with continuation
// lines joined and comments dropped.
type dockerfile []string

// readDockerfile reads the repository's Dockerfile.
func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	data, err := os.ReadFile(repoPath("Dockerfile"))
	require.NoError(t, err)
	var out dockerfile
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(strings.TrimSpace(cont) + " ")
			continue
		}
		cur.WriteString(line)
		out = append(out, cur.String())
		cur.Reset()
	}
	require.NoError(t, sc.Err())
	require.Empty(t, cur.String(), "the Dockerfile ends in a continuation line")
	return out
}

// with returns the instructions that start with keyword (e.g. "FROM").
func (d dockerfile) with(keyword string) []string {
	var out []string
	for _, ins := range d {
		if strings.HasPrefix(ins, keyword+" ") {
			out = append(out, strings.TrimPrefix(ins, keyword+" "))
		}
	}
	return out
}

// TestDockerfile checks the Dockerfile without a container engine (there
// is none where the tests run): its stages and user are the ones promised;
// its build context, as .dockerignore cuts it, holds the whole product
// module; and its build command, run in a copy of that context the way a
// RUN instruction runs it, makes a static binary that reports the version
// it was given, as `make build` does.
func TestDockerfile(t *testing.T) {
	d := readDockerfile(t)
	assert.Equal(t, []string{"--platform=$BUILDPLATFORM golang:1.26 AS builder", "scratch"}, d.with("FROM"))
	assert.Equal(t, []string{"65532:65532"}, d.with("USER"))
	assert.Equal(t, []string{`["/webhook"]`}, d.with("ENTRYPOINT"))
	goMod, err := os.ReadFile(repoPath("go.mod"))
	require.NoError(t, err)
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(goMod)
	require.NotNil(t, goVersion)
	assert.Contains(t, d.with("FROM")[0], "golang:"+string(goVersion[1]), "the builder's Go is the one go.mod asks for")

	// The build command, and the same version flags as the Makefile's.
	var build string
	for _, run := range d.with("RUN") {
		if strings.Contains(run, "go build") {
			build = run
		}
	}
	require.NotEmpty(t, build)
	assert.Contains(t, build, "CGO_ENABLED=0")
	makefile, err := os.ReadFile(repoPath("Makefile"))
	require.NoError(t, err)
	ldflags := regexp.MustCompile(`(?m)^LDFLAGS := (.*)$`).FindSubmatch(makefile)
	require.NotNil(t, ldflags)
	assert.Contains(t, build, `-ldflags "`+strings.ReplaceAll(string(ldflags[1]), "$(VERSION)", "${VERSION}")+`"`)
	assert.Contains(t, build, "-o /out/webhook ./cmd/webhook")

	// The build context.
	ctxDir := filepath.Join(t.TempDir(), "context")
	copied := copyBuildContext(t, env.RepoRoot, ctxDir)
	for _, must := range []string{"go.mod", "go.sum", "cmd/webhook/main.go"} {
		assert.Contains(t, copied, must)
	}
	for _, mustNot := range []string{"test/go.mod", "hack/tools/go.mod", "bin/webhook", "config/default/kustomization.yaml"} {
		assert.NotContains(t, copied, mustNot)
	}

	// The build, as RUN runs it: /bin/sh -c with the ARGs in the environment.
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command("/bin/sh", "-c", strings.ReplaceAll(strings.TrimPrefix(build, "RUN "), "/out/", out+"/"))
	cmd.Dir = ctxDir
	cmd.Env = append(os.Environ(), "TARGETOS=linux", "TARGETARCH="+runtime.GOARCH, "VERSION=v9.8.7-image-test", "GOFLAGS=-mod=readonly", "GOWORK=off")
	output, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s\n%s", cmd.String(), output)

	bin := filepath.Join(out, "webhook")
	f, err := elf.Open(bin)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "a static binary has no program interpreter")
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	assert.Empty(t, libs, "a static binary needs no shared library")
	version, err := exec.Command(bin, "--version").Output()
	require.NoError(t, err)
	assert.Equal(t, "v9.8.7-image-test", strings.TrimSpace(string(version)))
}

// copyBuildContext copies the files of root that .dockerignore leaves in
// the build context into dst and returns their slash-separated paths.
func copyBuildContext(t *testing.T, root, dst string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, ".dockerignore"))
	require.NoError(t, err)
	patterns, err := ignorefile.ReadAll(f)
	require.NoError(t, f.Close())
	require.NoError(t, err)
	pm, err := patternmatcher.New(patterns)
	require.NoError(t, err)
	var copied []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		excluded, err := pm.MatchesOrParentMatches(filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		if excluded {
			if d.IsDir() && !pm.Exclusions() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		copied = append(copied, filepath.ToSlash(rel))
		return os.WriteFile(target, data, 0o644)
	})
	require.NoError(t, err)
	return copied
}
