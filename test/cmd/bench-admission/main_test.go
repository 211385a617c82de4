package main

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		// 100 ms down to 1 ms: summarize must sort.
		hundred[i] = ms(100 - i)
	}
	tests := []struct {
		name               string
		lat                []time.Duration
		wall               time.Duration
		p50, p90, p99, avg time.Duration
		throughput         float64
	}{
		{name: "one sample", lat: []time.Duration{ms(7)}, wall: ms(10), p50: ms(7), p90: ms(7), p99: ms(7), avg: ms(7), throughput: 100},
		{name: "nearest rank of 1..100 ms", lat: hundred, wall: time.Second, p50: ms(50), p90: ms(90), p99: ms(99), avg: ms(50) + 500*time.Microsecond, throughput: 100},
		{name: "two samples", lat: []time.Duration{ms(30), ms(10)}, wall: ms(40), p50: ms(10), p90: ms(30), p99: ms(30), avg: ms(20), throughput: 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := summarize(tt.lat, tt.wall)
			if s.n != len(tt.lat) || s.p50 != tt.p50 || s.p90 != tt.p90 || s.p99 != tt.p99 || s.mean != tt.avg {
				t.Errorf("summarize = n %d, p50 %s, p90 %s, p99 %s, mean %s; want n %d, p50 %s, p90 %s, p99 %s, mean %s",
					s.n, s.p50, s.p90, s.p99, s.mean, len(tt.lat), tt.p50, tt.p90, tt.p99, tt.avg)
			}
			if s.throughput != tt.throughput {
				t.Errorf("throughput = %v, want %v", s.throughput, tt.throughput)
			}
		})
	}
}

func TestShare(t *testing.T) {
	tests := []struct {
		total, rounds int
		want          []int
	}{
		{total: 2000, rounds: 10, want: []int{200, 200, 200, 200, 200, 200, 200, 200, 200, 200}},
		{total: 10, rounds: 4, want: []int{3, 3, 2, 2}},
		{total: 3, rounds: 3, want: []int{1, 1, 1}},
	}
	for _, tt := range tests {
		sum := 0
		for round, want := range tt.want {
			got := share(tt.total, tt.rounds, round)
			if got != want {
				t.Errorf("share(%d, %d, %d) = %d, want %d", tt.total, tt.rounds, round, got, want)
			}
			sum += got
		}
		if sum != tt.total {
			t.Errorf("shares of %d over %d rounds add up to %d", tt.total, tt.rounds, sum)
		}
	}
}

func TestReadStatOfThisProcess(t *testing.T) {
	cpu := processCPU(nil)
	if _, ok := cpu["bench-admission"]; !ok {
		t.Fatalf("processCPU() = %v, want an entry for this process", cpu)
	}
	_, ppid, comm, ok := readStat(1)
	if !ok || comm == "" || ppid != 0 {
		t.Errorf("readStat(1) = ppid %d, comm %q, ok %v; want ppid 0 and a command name", ppid, comm, ok)
	}
}
