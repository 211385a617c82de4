package core

import (
	"strconv"
	"strings"
	"unicode"
)

// OrNone is s, or "<none>" when s is empty.
func OrNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// OrUnknown is s, or "<unknown>" when s is empty.
func OrUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

// OrDash is s, or "-" when s is empty.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// OneLine keeps a table cell on one line, with every character visible:
// each run of white space (a carriage return too, which would let later
// text hide earlier text) reads as one space, and every other character a
// terminal would not show as itself is escaped (visible).
func OneLine(s string) string {
	return visible(strings.Join(strings.Fields(s), " "))
}

// visible writes each character of s a terminal would not show as itself —
// a control character (a tab, a carriage return, an escape sequence, a
// backspace), a bidirectional override, a zero-width space — as its Go
// escape: \t, \r, \x1b, \b, \u202e. Spaces stay as they are.
func visible(s string) string {
	if strings.IndexFunc(s, hidden) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if !hidden(r) {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRune(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

// ConditionLine joins a multi-line condition message into one line.
func ConditionLine(msg string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(msg), "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if b.Len() > 0 {
			if strings.HasSuffix(b.String(), ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(l)
	}
	return b.String()
}

// Plural is one when n is 1, else many.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// hidden reports whether a terminal would not show r as itself.
func hidden(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }
