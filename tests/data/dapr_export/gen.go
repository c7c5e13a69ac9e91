// Writes dapr-scheduler-export.gob: what `dapr scheduler export -o FILE` (dapr/cli
// pkg/scheduler/exportimport.go) writes, a gob of ExportFile{Jobs, Counters map[string][]byte}
// holding go-etcd-cron's stored.Job / stored.Counter protobufs under their etcd keys. The
// protobufs are encoded by hand here (field numbers of go-etcd-cron's proto/stored and
// proto/api, Dapr's scheduler.v1.JobMetadata) so the fixture does not depend on jobsd's own
// decoding. Run: go run gen.go
package main

import (
	"encoding/gob"
	"os"
)

type ExportFile struct {
	Jobs     map[string][]byte
	Counters map[string][]byte
}

func varint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func tagged(b []byte, field int, wire int) []byte { return varint(b, uint64(field<<3|wire)) }
func u64(b []byte, field int, v uint64) []byte { return varint(tagged(b, field, 0), v) }
func msg(b []byte, field int, m []byte) []byte {
	return append(varint(tagged(b, field, 2), uint64(len(m))), m...)
}
func str(b []byte, field int, s string) []byte { return msg(b, field, []byte(s)) }

func timestamp(seconds uint64) []byte { return u64(nil, 1, seconds) }

func any(typeURL string, value []byte) []byte { return msg(str(nil, 1, typeURL), 2, value) }

// scheduler.v1.JobMetadata{app_id, namespace, target{job{}}} or target{actor{id, type}}.
func appMetadata(app string) []byte {
	target := msg(nil, 1, nil)
	return any("type.googleapis.com/dapr.proto.scheduler.v1.JobMetadata",
		msg(str(str(nil, 1, app), 2, "default"), 3, target))
}

func actorMetadata(app, typ, id string) []byte {
	actor := str(str(nil, 1, id), 2, typ)
	return any("type.googleapis.com/dapr.proto.scheduler.v1.JobMetadata",
		msg(str(str(nil, 1, app), 2, "default"), 3, msg(nil, 2, actor)))
}

// FailurePolicy{constant{interval{seconds}, max_retries}}.
func constant(seconds uint64, retries uint64) []byte {
	return msg(nil, 2, u64(msg(nil, 1, u64(nil, 1, seconds)), 2, retries))
}

func main() {
	// stored.Job{partition_id=1, start=2 | due_time=3, expiration=4, job=5}
	// api.Job{schedule=1, due_time=2, ttl=3, repeats=4, metadata=5, payload=6, failure_policy=7}
	nightly := u64(nil, 1, 42)
	nightly = msg(nightly, 2, timestamp(1767225600)) // start 2026-01-01T00:00:00Z
	nightly = msg(nightly, 4, timestamp(1798761600)) // expiration 2027-01-01T00:00:00Z
	api := str(nil, 1, "0 0 2 * * *")
	api = str(api, 3, "8760h")
	api = msg(api, 5, appMetadata("myapp"))
	api = msg(api, 7, constant(1, 3))
	nightly = msg(nightly, 5, api)

	once := u64(nil, 1, 7)
	once = msg(once, 3, timestamp(1893456000)) // due 2030-01-01T00:00:00Z
	api = str(nil, 2, "2030-01-01T00:00:00Z")
	api = msg(api, 5, appMetadata("myapp"))
	api = msg(api, 6, any("type.googleapis.com/google.protobuf.StringValue", str(nil, 1, "hello")))
	api = msg(api, 7, msg(nil, 1, nil)) // drop
	once = msg(once, 5, api)

	other := u64(nil, 1, 9)
	other = msg(other, 2, timestamp(1767225600))
	other = msg(other, 5, msg(str(nil, 1, "@every 1h"), 5, appMetadata("otherapp")))

	reminder := u64(nil, 1, 11)
	reminder = msg(reminder, 2, timestamp(1767225600))
	reminder = msg(reminder, 5, msg(str(nil, 1, "@every 1m"), 5, actorMetadata("myapp", "MyActor", "a1")))

	// stored.Counter{job_partition_id=1, count=2, last_trigger=3, attempts=4}
	nightlyCounter := u64(u64(msg(u64(nil, 1, 42), 3, timestamp(1767406800)), 2, 3), 4, 1)
	onceStale := u64(u64(nil, 1, 6), 2, 1) // another version's: not restored

	out := ExportFile{
		Jobs: map[string][]byte{
			"dapr/jobs/app||default||myapp||nightly":           nightly,
			"dapr/jobs/app||default||myapp||once":              once,
			"dapr/jobs/app||default||otherapp||hourly":         other,
			"dapr/jobs/actorreminder||default||MyActor||a1||r": reminder,
		},
		Counters: map[string][]byte{
			"dapr/counters/app||default||myapp||nightly": nightlyCounter,
			"dapr/counters/app||default||myapp||once":    onceStale,
		},
	}
	f, err := os.Create("dapr-scheduler-export.gob")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if err := gob.NewEncoder(f).Encode(&out); err != nil {
		panic(err)
	}
}
