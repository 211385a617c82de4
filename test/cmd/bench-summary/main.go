// Command bench-summary checks that the figures a document quotes from
// benchmark runs are the figures those runs wrote: every number with a
// decimal point inside the document's figure regions must equal, at the
// precision the document prints it with, a number of the summary (the JSON
// that make bench writes as bench/summary.json, checked in as
// test/bench/summary.json beside the harnesses). So no figure in the docs
// lacks a run.
//
// docs/benchmarks.md quotes the latest runs and test/bench/history.md the
// runs before them; the summary keeps every run under a key of its own, so
// both are checked against it alike, as every other page of docs/ with a
// figure region is (docs/install.md's sizing).
//
// A figure region starts with the line
//
//	<!-- figures: test/bench/summary.json -->
//
// and ends with <!-- end figures -->. Version numbers (v1.36.1, 1.35.2) and
// integers are not checked: counts and dates are quoted from the command
// lines and the summary's strings, which a reader can compare by eye.
//
// Usage (from the test module):
//
//	go run ./cmd/bench-summary --summary bench/summary.json ../docs/benchmarks.md bench/history.md
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Markers of a figure region.
const (
	regionStart = "<!-- figures: test/bench/summary.json -->"
	regionEnd   = "<!-- end figures -->"
)

// figureRE matches a decimal figure, with thousands separators, and the
// characters around it that tell a version apart.
var figureRE = regexp.MustCompile(`[vV]?\d[\d,]*(\.\d+)+`)

// numberRE finds numbers inside the summary's strings (load averages,
// answer times, garbage-collector lines).
var numberRE = regexp.MustCompile(`-?\d+(\.\d+)?`)

func main() {
	summary := flag.String("summary", "", "the JSON summary the documents quote (test/bench/summary.json)")
	flag.Parse()
	if *summary == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: bench-summary --summary FILE DOC...")
		os.Exit(2)
	}
	failed := false
	for _, doc := range flag.Args() {
		checked, err := CheckFiles(*summary, doc)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			failed = true
			continue
		}
		fmt.Printf("%s: %d figures, every one in %s\n", doc, checked, *summary)
	}
	if failed {
		os.Exit(1)
	}
}

// CheckFiles checks the document at docPath against the summary at
// summaryPath (see the package comment) and returns how many figures it
// checked.
func CheckFiles(summaryPath, docPath string) (int, error) {
	raw, err := os.ReadFile(summaryPath)
	if err != nil {
		return 0, fmt.Errorf("reading the summary: %w", err)
	}
	doc, err := os.ReadFile(docPath)
	if err != nil {
		return 0, fmt.Errorf("reading the document: %w", err)
	}
	values, err := Values(raw)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", summaryPath, err)
	}
	n, err := Check(string(doc), values)
	if err != nil {
		return n, fmt.Errorf("%s against %s: %w", docPath, summaryPath, err)
	}
	return n, nil
}

// Values returns every number of a JSON summary: its numeric values and
// the numbers written inside its strings.
func Values(summary []byte) ([]float64, error) {
	var v any
	if err := json.Unmarshal(summary, &v); err != nil {
		return nil, fmt.Errorf("decoding the summary: %w", err)
	}
	var out []float64
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case float64:
			out = append(out, t)
		case string:
			for _, m := range numberRE.FindAllString(t, -1) {
				if f, err := strconv.ParseFloat(m, 64); err == nil {
					out = append(out, f)
				}
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		case map[string]any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(v)
	return out, nil
}

// Check checks every decimal figure in doc's figure regions against
// values, and returns how many it checked. A document without a figure
// region, or whose regions hold no figure, fails: the check would be
// empty.
func Check(doc string, values []float64) (int, error) {
	regions, err := regions(doc)
	if err != nil {
		return 0, err
	}
	if len(regions) == 0 {
		return 0, fmt.Errorf("no figure region (%s … %s)", regionStart, regionEnd)
	}
	checked := 0
	var errs []error
	for _, r := range regions {
		for _, loc := range figureRE.FindAllStringIndex(r.text, -1) {
			tok := r.text[loc[0]:loc[1]]
			if isVersion(r.text, loc[0], loc[1]) {
				continue
			}
			checked++
			if !quoted(tok, values) {
				errs = append(errs, fmt.Errorf("line %d: %s is in no run of the summary", r.line+strings.Count(r.text[:loc[0]], "\n"), tok))
			}
		}
	}
	if checked == 0 {
		return 0, errors.New("the figure regions hold no figure")
	}
	return checked, errors.Join(errs...)
}

// region is the text of one figure region and the line it starts on.
type region struct {
	text string
	line int
}

func regions(doc string) ([]region, error) {
	var out []region
	rest, offset := doc, 0
	for {
		i := strings.Index(rest, regionStart)
		if i < 0 {
			return out, nil
		}
		body := rest[i+len(regionStart):]
		j := strings.Index(body, regionEnd)
		if j < 0 {
			return nil, fmt.Errorf("line %d: figure region without %s", 1+strings.Count(doc[:offset+i], "\n"), regionEnd)
		}
		out = append(out, region{text: body[:j], line: 1 + strings.Count(doc[:offset+i], "\n")})
		consumed := i + len(regionStart) + j + len(regionEnd)
		rest, offset = rest[consumed:], offset+consumed
	}
}

// isVersion tells a version (v1.36, 1.35.2, a commit's date is no figure
// either) from a figure: a leading v, two dots, or a dot right after.
func isVersion(text string, start, end int) bool {
	tok := text[start:end]
	if tok[0] == 'v' || tok[0] == 'V' || strings.Count(tok, ".") > 1 {
		return true
	}
	if end < len(text) && text[end] == '.' && end+1 < len(text) && text[end+1] >= '0' && text[end+1] <= '9' {
		return true
	}
	return start > 0 && (text[start-1] == '.' || text[start-1] == 'v')
}

// quoted tells whether tok, a decimal figure, is one of values printed
// with tok's precision.
func quoted(tok string, values []float64) bool {
	tok = strings.ReplaceAll(tok, ",", "")
	decimals := len(tok) - strings.IndexByte(tok, '.') - 1
	for _, v := range values {
		if strconv.FormatFloat(v, 'f', decimals, 64) == tok {
			return true
		}
	}
	return false
}
