package framework

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRaceWatcherKeepsEachReport: the reports the race detector writes
// are found across writes that split lines, each kept whole, and counted.
func TestRaceWatcherKeepsEachReport(t *testing.T) {
	w := &raceWatcher{}
	require.NoError(t, w.err(), "no report yet")
	out := "I1203 guard ready\n" +
		"==================\n" +
		"WARNING: DATA RACE\n" +
		"Write at 0x00c000123 by goroutine 7:\n" +
		"  github.com/rollout-guard/rollout-guard/history.(*Memo).Put()\n" +
		"Previous read at 0x00c000123 by goroutine 9:\n" +
		"  github.com/rollout-guard/rollout-guard/history.(*Memo).Get()\n" +
		"==================\n" +
		"I1203 more log\n" +
		"==================\n" +
		"WARNING: DATA RACE\n" +
		"Read at 0x00c000456 by goroutine 3:\n" +
		"==================\n"
	for i := 0; i < len(out); i += 7 {
		_, err := w.Write([]byte(out[i:min(i+7, len(out))]))
		require.NoError(t, err)
	}
	err := w.err()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reported 2 data race(s)")
	assert.Contains(t, err.Error(), "WARNING: DATA RACE\nWrite at 0x00c000123 by goroutine 7:\n  github.com/rollout-guard/rollout-guard/history.(*Memo).Put()\nPrevious read at 0x00c000123 by goroutine 9:\n  github.com/rollout-guard/rollout-guard/history.(*Memo).Get()")
	assert.Contains(t, err.Error(), "WARNING: DATA RACE\nRead at 0x00c000456 by goroutine 3:")
	assert.NotContains(t, err.Error(), "more log")
}
