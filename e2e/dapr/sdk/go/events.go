package main

// The events file an app writes and the client reads: one JSON object a line.

import (
	"bufio"
	"encoding/json"
	"log"
	"os"
	"sync"
	"time"
)

type event struct {
	T       float64 `json:"t"`
	Kind    string  `json:"kind"` // job | reminder | timer | method
	Name    string  `json:"name,omitempty"`
	Actor   string  `json:"actor,omitempty"`
	Data    []byte  `json:"data_b64,omitempty"` // base64 in JSON
	Text    string  `json:"text,omitempty"`
	DueTime string  `json:"due_time,omitempty"`
	Period  string  `json:"period,omitempty"`
}

var (
	eventsMu   sync.Mutex
	eventsFile *os.File
)

func openEvents(path string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		log.Fatalf("events file: %v", err)
	}
	eventsFile = f
}

func record(e event) {
	e.T = float64(time.Now().UnixNano()) / 1e9
	line, _ := json.Marshal(e)
	eventsMu.Lock()
	defer eventsMu.Unlock()
	_, _ = eventsFile.Write(append(line, '\n'))
	_ = eventsFile.Sync()
}

// readEvents returns the events of path that match keep.
func readEvents(path string, keep func(event) bool) []event {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) == nil && keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// waitEvents polls path until at least n events match keep, or timeout passes; it returns what
// matched by then.
func waitEvents(path string, n int, timeout time.Duration, keep func(event) bool) []event {
	deadline := time.Now().Add(timeout)
	for {
		got := readEvents(path, keep)
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}
