package status

import "testing"

func TestSummaryOfAnInPlaceRollout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		machines []MachineStatus
		want     string
	}{
		{"replacing", []MachineStatus{{Name: "a", Old: true}, {Name: "b", Old: true}, {Name: "c"}},
			"1 of 3 machines up to date, 3 available (2 old machines pending deletion)"},
		{"updating in place: the old ones wait their turn", []MachineStatus{{Name: "a", Old: true}, {Name: "b", Updating: true}, {Name: "c"}},
			"1 of 3 machines up to date, 3 available (1 old machine waiting to be updated in place or replaced, 1 machine updating in place)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := StatusReport{Observed: true, Replicas: 3, UpToDate: 1, Available: 3, Machines: tc.machines}
			if got := s.Summary(); got != tc.want {
				t.Fatalf("Summary = %q, want %q", got, tc.want)
			}
		})
	}
}
