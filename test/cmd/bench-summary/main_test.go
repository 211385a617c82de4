package main

import (
	"strings"
	"testing"
)

const summary = `{"admission": {"machine": {"load_at_start": "2.81 6.07 6.54"}, "ratios": [{"value": {"pooled": 1.861, "min": 1.304, "max": 3.421}}]},
 "scale": {"worlds": [{"guards": [{"rss_peak_burst_mib": 136.5, "boot_reconciliation_s": 71.2}]}]}}`

func TestCheck(t *testing.T) {
	values, err := Values([]byte(summary))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		doc     string
		checked int
		bad     string
	}{
		{name: "figures at the printed precision", checked: 6,
			doc: "x\n" + regionStart + "\nratio 1.86× (1.30–3.42), 136.5 MiB, boot 71 s or 71.2 s, load 2.81\n" + regionEnd + "\n9.99 outside"},
		{name: "versions and integers are not figures", checked: 1,
			doc: regionStart + "\nkube-apiserver v1.36.3, skew 1.35.2, 2,000 clusters, 3 rounds, 4.4\n" + regionEnd, bad: "4.4"},
		{name: "a figure no run gave", checked: 2,
			doc: regionStart + "\n1.86× and 1.87×\n" + regionEnd, bad: "1.87"},
		{name: "a trailing zero", checked: 1,
			doc: regionStart + "\n136.50\n" + regionEnd, bad: ""},
		{name: "no region", doc: "1.86", bad: "no figure region"},
		{name: "empty region", doc: regionStart + "\nnothing\n" + regionEnd, bad: "no figure"},
		{name: "unterminated region", doc: regionStart + "\n1.86", bad: "without"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := Check(tt.doc, values)
			if tt.bad == "" && err != nil {
				t.Fatalf("Check = %v, want no error", err)
			}
			if tt.bad != "" && (err == nil || !strings.Contains(err.Error(), tt.bad)) {
				t.Fatalf("Check = %v, want an error naming %q", err, tt.bad)
			}
			if tt.checked != 0 && n != tt.checked {
				t.Errorf("checked %d figures, want %d", n, tt.checked)
			}
		})
	}
}
