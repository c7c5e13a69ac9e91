package main

// The Go SDK as a client: the matrix's checks, each printed as one line
//
//	RESULT<TAB>feature<TAB>pass|fail|na<TAB>note
//
// for e2e/dapr/sdk.sh to collect. Jobs go to the sidecar of the jobs app, actor calls to the
// sidecar of the actor app; what the apps received is read from their events files.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	runtimev1pb "github.com/dapr/dapr/pkg/proto/runtime/v1"
	dapr "github.com/dapr/go-sdk/client"
	daprhttp "github.com/dapr/go-sdk/service/http"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const actorType = "GoSdkActor"

type checker struct {
	mu      sync.Mutex
	failed  int
	jobsEv  string
	actorEv string
	actHTTP string
	path    string // i | ii | iii: on ii the sidecar keeps no actor state
}

// noState is the note of actor.state on path ii.
const noState = "a Dapr Scheduler keeps no actor state: the jobsd sidecar answers daprd's ERR_ACTOR_RUNTIME_NOT_FOUND"

// stateStub is the client side of GoSdkActor's state methods, as a Go user calls an actor:
// a struct of func fields the SDK fills in (ImplActorClientStub).
type stateStub struct {
	id          string
	SetCount    func(context.Context, int) (int, error)
	GetCount    func(context.Context) (int, error)
	RemoveCount func(context.Context) (bool, error)
	GetSeeded   func(context.Context) (map[string]any, error)
}

func (s *stateStub) Type() string { return actorType }
func (s *stateStub) ID() string   { return s.id }

func (c *checker) emit(feature, st, note string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st == "fail" {
		c.failed++
	}
	note = strings.ReplaceAll(strings.ReplaceAll(note, "\t", " "), "\n", " ")
	fmt.Printf("RESULT\t%s\t%s\t%s\n", feature, st, note)
}

// run runs one check: fn returns the note of a pass, or an error (a fail).
func (c *checker) run(feature string, fn func() (string, error)) bool {
	note, err := fn()
	if err != nil {
		c.emit(feature, "fail", err.Error())
		return false
	}
	c.emit(feature, "pass", note)
	return true
}

// payload is job data as a Go user sends it: a StringValue in an Any, non-ASCII included.
func payload(tag string) *anypb.Any {
	a, _ := anypb.New(wrapperspb.String("go-sdk " + tag + ": h\u00e9llo \u2713 {\"k\":[1,2]}"))
	return a
}

func sameAny(a, b *anypb.Any) bool {
	return a != nil && b != nil && bytes.Equal(a.GetValue(), b.GetValue())
}

func strp(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func u32p(p *uint32) any {
	if p == nil {
		return nil
	}
	return *p
}

func jobNamed(name string) func(event) bool {
	return func(e event) bool { return e.Kind == "job" && e.Name == name }
}

// quiet waits `d` and returns how many events matching keep arrived meanwhile.
func quiet(path string, d time.Duration, keep func(event) bool) int {
	before := len(readEvents(path, keep))
	time.Sleep(d)
	return len(readEvents(path, keep)) - before
}

// envAddr is 127.0.0.1:<the port in env var name>, or "" when it is not set.
func envAddr(name string) string {
	if p := os.Getenv(name); p != "" {
		return "127.0.0.1:" + p
	}
	return ""
}

func client(args []string) int {
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	jobsAddr := fs.String("jobs-grpc", envAddr("SDKM_JOBS_GRPC"), "gRPC address of the jobs app's sidecar")
	actorsAddr := fs.String("actors-grpc", envAddr("SDKM_ACTORS_GRPC"), "gRPC address of the actor app's sidecar")
	actorsHTTP := fs.String("actors-http", envAddr("SDKM_ACTORS_HTTP"), "HTTP address of the actor app's sidecar")
	jobsEv := fs.String("jobs-events", os.Getenv("SDKM_JOBS_EVENTS"), "the jobs app's events file")
	actorEv := fs.String("actor-events", os.Getenv("SDKM_ACTOR_EVENTS"), "the actor app's events file")
	_ = fs.Parse(args)
	c := &checker{jobsEv: *jobsEv, actorEv: *actorEv, actHTTP: *actorsHTTP, path: os.Getenv("SDKM_PATH")}

	// The jobs and the actor checks go to different sidecars and apps: they run side by side.
	var wg sync.WaitGroup
	if *jobsAddr != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := dapr.NewClientWithAddress(*jobsAddr)
			if err != nil {
				c.emit("job.schedule", "fail", "client: "+err.Error())
				return
			}
			c.jobs(cl)
			cl.Close()
		}()
	}
	defer wg.Wait()
	if *actorsAddr != "" {
		cl, err := dapr.NewClientWithAddress(*actorsAddr)
		if err != nil {
			c.emit("actor.invoke", "fail", "client: "+err.Error())
		} else {
			c.actors(cl)
			cl.Close()
		}
	}
	wg.Wait()
	if c.failed > 0 {
		return 1
	}
	return 0
}

func (c *checker) jobs(cl dapr.Client) {
	ctx := context.Background()
	stub := runtimev1pb.NewDaprClient(cl.GrpcClientConn())

	c.run("job.schedule", func() (string, error) {
		err := cl.ScheduleJob(ctx, dapr.NewJob("get1", dapr.WithJobSchedule("@every 1h"),
			dapr.WithJobRepeats(3), dapr.WithJobData(payload("get1"))))
		return "ScheduleJob @every 1h x3 with data", err
	})
	c.run("job.get", func() (string, error) {
		j, err := cl.GetJob(ctx, "get1")
		if err != nil {
			return "", err
		}
		if j.Schedule == nil || *j.Schedule != "@every 1h" || j.Repeats == nil || *j.Repeats != 3 || !sameAny(j.Data, payload("get1")) {
			return "", fmt.Errorf("GetJob returned schedule=%v repeats=%v data=%x", strp(j.Schedule), u32p(j.Repeats), j.Data.GetValue())
		}
		return "schedule, repeats and data as scheduled", nil
	})
	c.run("job.list", func() (string, error) {
		resp, err := stub.ListJobsAlpha1(ctx, &runtimev1pb.ListJobsRequestAlpha1{})
		if err != nil {
			return "", fmt.Errorf("ListJobsAlpha1: %w", err)
		}
		for _, j := range resp.GetJobs() {
			if j.GetName() == "get1" {
				if !sameAny(j.GetData(), payload("get1")) || j.GetSchedule() != "@every 1h" {
					return "", fmt.Errorf("listed get1 differs: %v", j)
				}
				return fmt.Sprintf("go-sdk client has no list: ListJobsAlpha1 on its dapr proto stubs (%d jobs)", len(resp.GetJobs())), nil
			}
		}
		return "", fmt.Errorf("get1 not in ListJobsAlpha1's %d jobs", len(resp.GetJobs()))
	})
	c.run("job.delete", func() (string, error) {
		if err := cl.DeleteJob(ctx, "get1"); err != nil {
			return "", err
		}
		_, err := cl.GetJob(ctx, "get1")
		if err == nil {
			return "", errors.New("GetJob after DeleteJob succeeded")
		}
		if status.Code(err) != codes.Internal { // daprd maps the Scheduler's NotFound to Internal
			return "", fmt.Errorf("GetJob after DeleteJob: want Internal (as daprd), got %v", err)
		}
		return "DeleteJob, then GetJob fails with Internal (as daprd)", nil
	})
	c.run("job.receive", func() (string, error) {
		if err := cl.ScheduleJob(ctx, dapr.NewJob("recv", dapr.WithJobDueTime("1s"), dapr.WithJobData(payload("recv")))); err != nil {
			return "", err
		}
		got := waitEvents(c.jobsEv, 1, 20*time.Second, jobNamed("recv"))
		if len(got) != 1 {
			return "", fmt.Errorf("service/grpc handler got %d events of job recv in 20 s, want 1", len(got))
		}
		if !bytes.Equal(got[0].Data, payload("recv").GetValue()) {
			return "", fmt.Errorf("data differs: got %x", got[0].Data)
		}
		if n := quiet(c.jobsEv, 2*time.Second, jobNamed("recv")); n != 0 {
			return "", fmt.Errorf("one-shot job delivered %d more times", n)
		}
		return "service/grpc JobEvent once, data bytes intact (service/http has no job handler in go-sdk)", nil
	})
	c.run("job.repeats", func() (string, error) {
		if err := cl.ScheduleJob(ctx, dapr.NewJob("rep", dapr.WithJobSchedule("@every 1s"), dapr.WithJobRepeats(3),
			dapr.WithJobData(payload("rep")))); err != nil {
			return "", err
		}
		got := waitEvents(c.jobsEv, 3, 20*time.Second, jobNamed("rep"))
		if len(got) != 3 {
			return "", fmt.Errorf("@every 1s x3: %d deliveries in 20 s, want 3", len(got))
		}
		for i, e := range got {
			if !bytes.Equal(e.Data, payload("rep").GetValue()) {
				return "", fmt.Errorf("delivery %d: data differs", i+1)
			}
			if i > 0 && e.T-got[i-1].T < 0.5 {
				return "", fmt.Errorf("deliveries %.2f s apart (every 1 s)", e.T-got[i-1].T)
			}
		}
		if n := quiet(c.jobsEv, 2*time.Second, jobNamed("rep")); n != 0 {
			return "", fmt.Errorf("%d deliveries beyond the 3 repeats", n)
		}
		if _, err := cl.GetJob(ctx, "rep"); err == nil {
			return "", errors.New("GetJob still finds the job after its last repeat")
		}
		return "@every 1s x3: exactly 3 deliveries ~1 s apart, data intact, then gone", nil
	})
	// The SDK's HTTP service as a job receiver: asked here, so that the note is its own answer.
	if err := daprhttp.NewService("127.0.0.1:0").AddJobEventHandler("recv", onJob); err != nil {
		c.emit("job.receive_service_http", "na", "go-sdk's service/http AddJobEventHandler: "+err.Error())
	} else {
		c.emit("job.receive_service_http", "fail", "service/http now has a job handler: add it to the matrix")
	}
	c.run("job.overwrite", func() (string, error) {
		if err := cl.ScheduleJob(ctx, dapr.NewJob("ow", dapr.WithJobDueTime("1h"), dapr.WithJobData(payload("ow-a")))); err != nil {
			return "", err
		}
		err := cl.ScheduleJob(ctx, dapr.NewJob("ow", dapr.WithJobDueTime("1h"), dapr.WithJobData(payload("ow-b"))))
		if status.Code(err) != codes.AlreadyExists {
			return "", fmt.Errorf("second ScheduleJob without overwrite: want AlreadyExists, got %v", err)
		}
		j := dapr.NewJob("ow", dapr.WithJobDueTime("1s"), dapr.WithJobData(payload("ow-b")))
		j.Overwrite = true
		if err := cl.ScheduleJob(ctx, j); err != nil {
			return "", fmt.Errorf("ScheduleJob with Overwrite: %w", err)
		}
		got := waitEvents(c.jobsEv, 1, 20*time.Second, jobNamed("ow"))
		if len(got) != 1 || !bytes.Equal(got[0].Data, payload("ow-b").GetValue()) {
			return "", fmt.Errorf("after overwrite: %d deliveries (want 1 with the new data)", len(got))
		}
		return "AlreadyExists without Overwrite; Overwrite replaces data and due time", nil
	})
	c.run("job.failure_policy", func() (string, error) {
		fp := dapr.NewJob("fp-get", dapr.WithJobDueTime("1h"), dapr.WithJobConstantFailurePolicyMaxRetries(2),
			dapr.WithJobConstantFailurePolicyInterval(time.Second))
		if err := cl.ScheduleJob(ctx, fp); err != nil {
			return "", err
		}
		j, err := cl.GetJob(ctx, "fp-get")
		if err != nil {
			return "", err
		}
		cp, ok := j.FailurePolicy.(*dapr.JobFailurePolicyConstant)
		if !ok || cp.MaxRetries == nil || *cp.MaxRetries != 2 || cp.Interval == nil || *cp.Interval != time.Second {
			return "", fmt.Errorf("GetJob's failure policy: %#v", j.FailurePolicy)
		}
		_ = cl.DeleteJob(ctx, "fp-get")
		if err := cl.ScheduleJob(ctx, dapr.NewJob("fail-const", dapr.WithJobDueTime("1s"), dapr.WithJobData(payload("fc")),
			dapr.WithJobConstantFailurePolicyMaxRetries(2), dapr.WithJobConstantFailurePolicyInterval(time.Second))); err != nil {
			return "", err
		}
		if err := cl.ScheduleJob(ctx, dapr.NewJob("fail-drop", dapr.WithJobDueTime("1s"), dapr.WithJobData(payload("fd")),
			dapr.WithJobDropFailurePolicy())); err != nil {
			return "", err
		}
		got := waitEvents(c.jobsEv, 3, 30*time.Second, jobNamed("fail-const"))
		if len(got) != 3 {
			return "", fmt.Errorf("constant 1s x2: %d attempts in 30 s, want 3", len(got))
		}
		for i := 1; i < len(got); i++ {
			if gap := got[i].T - got[i-1].T; gap < 0.8 {
				return "", fmt.Errorf("retry %d came %.2f s after the previous attempt (interval 1 s)", i, gap)
			}
		}
		if n := quiet(c.jobsEv, 3*time.Second, jobNamed("fail-const")); n != 0 {
			return "", fmt.Errorf("constant 1s x2: %d attempts beyond the 3", n)
		}
		if n := len(readEvents(c.jobsEv, jobNamed("fail-drop"))); n != 1 {
			return "", fmt.Errorf("drop policy: %d attempts, want 1", n)
		}
		return "GetJob returns constant 1s x2; a failing app gets 1+2 attempts >=1 s apart; drop: 1 attempt", nil
	})
}

func (c *checker) httpGetReminder(name string) (int, map[string]any, error) {
	url := fmt.Sprintf("http://%s/v1.0/actors/%s/a1/reminders/%s", c.actHTTP, actorType, name)
	resp, err := http.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	if resp.StatusCode != 200 {
		return resp.StatusCode, map[string]any{"body": string(body)}, nil
	}
	return resp.StatusCode, m, nil
}

func (c *checker) actors(cl dapr.Client) {
	ctx := context.Background()
	remData := []byte(`"go-sdk reminder h\u00e9llo \u2713"`)
	reminder := func(e event) bool { return e.Kind == "reminder" && e.Actor == "a1" && e.Name == "r1" }
	timer := func(e event) bool { return e.Kind == "timer" && e.Actor == "a1" }

	invoke := func() (string, error) {
		out, err := cl.InvokeActor(ctx, &dapr.InvokeActorRequest{ActorType: actorType, ActorID: "a1", Method: "Ping", Data: []byte(`"hi"`)})
		if err != nil {
			return "", err
		}
		if string(out.Data) != `"pong:hi"` {
			return "", fmt.Errorf("Ping answered %q", out.Data)
		}
		return "InvokeActor Ping through the sidecar", nil
	}
	if !c.run("actor.invoke", invoke) {
		// The first call failed (recorded above); the other actor checks still run once a call
		// goes through, so that one fault does not hide the rest.
		t0 := time.Now()
		for {
			if _, err := invoke(); err == nil {
				fmt.Printf("# a later actor call succeeded %.1f s after\n", time.Since(t0).Seconds())
				break
			}
			if time.Since(t0) > 20*time.Second {
				for _, f := range []string{"reminder.register", "reminder.get", "reminder.ticks", "reminder.unregister", "actor.timer", "actor.state"} {
					c.emit(f, "fail", "skipped: no actor call succeeded within 20 s")
				}
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	registered := c.run("reminder.register", func() (string, error) {
		return "RegisterActorReminder due 1s period 1s", cl.RegisterActorReminder(ctx, &dapr.RegisterActorReminderRequest{
			ActorType: actorType, ActorID: "a1", Name: "r1", DueTime: "1s", Period: "1s", Data: remData})
	})
	c.run("reminder.get", func() (string, error) {
		code, m, err := c.httpGetReminder("r1")
		if err != nil {
			return "", err
		}
		if code != 200 || m["period"] == nil {
			return "", fmt.Errorf("GET reminder: %d %v", code, m)
		}
		return fmt.Sprintf("go-sdk has no get: sidecar HTTP GET 200 period=%v data=%v", m["period"], m["data"]), nil
	})
	c.run("reminder.ticks", func() (string, error) {
		if !registered {
			return "", errors.New("not registered")
		}
		got := waitEvents(c.actorEv, 3, 20*time.Second, reminder)
		if len(got) < 3 {
			return "", fmt.Errorf("%d ticks in 20 s, want >= 3", len(got))
		}
		for i, e := range got {
			if !bytes.Equal(e.Data, remData) {
				return "", fmt.Errorf("ReminderCall state %q, want %q", e.Data, remData)
			}
			if i > 0 && e.T-got[i-1].T < 0.5 {
				return "", fmt.Errorf("ticks %.2f s apart (period 1 s)", e.T-got[i-1].T)
			}
		}
		return "ReminderCall >= 3 ticks ~1 s apart, state intact", nil
	})
	c.run("reminder.unregister", func() (string, error) {
		if err := cl.UnregisterActorReminder(ctx, &dapr.UnregisterActorReminderRequest{ActorType: actorType, ActorID: "a1", Name: "r1"}); err != nil {
			return "", err
		}
		time.Sleep(1500 * time.Millisecond) // a tick already in flight may still land
		if n := quiet(c.actorEv, 3*time.Second, reminder); n != 0 {
			return "", fmt.Errorf("%d ticks after unregistering", n)
		}
		if code, m, err := c.httpGetReminder("r1"); err != nil || code == 200 {
			return "", fmt.Errorf("GET after unregister: %d %v %v", code, m, err)
		}
		return "UnregisterActorReminder: no more ticks, GET no longer 200", nil
	})
	c.run("actor.timer", func() (string, error) {
		if err := cl.RegisterActorTimer(ctx, &dapr.RegisterActorTimerRequest{ActorType: actorType, ActorID: "a1", Name: "t1",
			DueTime: "1s", Period: "1s", Data: []byte(`"tick"`), CallBack: "OnTimer"}); err != nil {
			return "", err
		}
		got := waitEvents(c.actorEv, 3, 20*time.Second, timer)
		if len(got) < 3 {
			return "", fmt.Errorf("%d timer ticks in 20 s, want >= 3", len(got))
		}
		for i, e := range got {
			if e.Text != "tick" {
				return "", fmt.Errorf("OnTimer got %q, want \"tick\"", e.Text)
			}
			if i > 0 && e.T-got[i-1].T < 0.5 {
				return "", fmt.Errorf("timer ticks %.2f s apart (period 1 s)", e.T-got[i-1].T)
			}
		}
		if err := cl.UnregisterActorTimer(ctx, &dapr.UnregisterActorTimerRequest{ActorType: actorType, ActorID: "a1", Name: "t1"}); err != nil {
			return "", err
		}
		time.Sleep(1500 * time.Millisecond)
		if n := quiet(c.actorEv, 3*time.Second, timer); n != 0 {
			return "", fmt.Errorf("%d timer ticks after unregistering", n)
		}
		return "RegisterActorTimer (callback OnTimer) >= 3 ticks with data; UnregisterActorTimer stops it", nil
	})
	c.actorState(cl)
}

// httpState is the sidecar's GET /v1.0/actors/{type}/{id}/state/{key}: status and raw body.
func (c *checker) httpState(id, key string) (int, []byte, error) {
	resp, err := http.Get(fmt.Sprintf("http://%s/v1.0/actors/%s/%s/state/%s", c.actHTTP, actorType, id, key))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// httpStateTx is the sidecar's POST /v1.0/actors/{type}/{id}/state: a transaction.
func (c *checker) httpStateTx(id string, ops any) (int, []byte, error) {
	b, _ := json.Marshal(ops)
	resp, err := http.Post(fmt.Sprintf("http://%s/v1.0/actors/%s/%s/state", c.actHTTP, actorType, id), "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

func errorCode(body []byte) string {
	var m struct {
		ErrorCode string `json:"errorCode"`
	}
	_ = json.Unmarshal(body, &m)
	return m.ErrorCode
}

// actorState: actor.state. GoSdkActor keeps "count" with the SDK's state manager; the client
// calls it through an ImplActorClientStub proxy and reads the value raw over the sidecar.
func (c *checker) actorState(cl dapr.Client) {
	ctx := context.Background()
	s1 := &stateStub{id: "s1"}
	cl.ImplActorClientStub(s1)
	upsert := func(key string, v any) any {
		return []map[string]any{{"operation": "upsert", "request": map[string]any{"key": key, "value": v}}}
	}
	if c.path == "ii" {
		// No actor state behind a Dapr Scheduler: check the sidecar really says so.
		if _, err := s1.SetCount(ctx, 7); err == nil {
			c.emit("actor.state", "fail", "SetCount succeeded on a sidecar that keeps no actor state")
			return
		}
		var bad []string
		code, body, err := c.httpState("s1", "count")
		if err != nil || code != 500 || errorCode(body) != "ERR_ACTOR_RUNTIME_NOT_FOUND" {
			bad = append(bad, fmt.Sprintf("GET: %d %s %v", code, body, err))
		}
		code, body, err = c.httpStateTx("s1", upsert("count", 1))
		if err != nil || code != 500 || errorCode(body) != "ERR_ACTOR_RUNTIME_NOT_FOUND" {
			bad = append(bad, fmt.Sprintf("POST: %d %s %v", code, body, err))
		}
		if bad != nil {
			c.emit("actor.state", "fail", "want 500 ERR_ACTOR_RUNTIME_NOT_FOUND, got "+strings.Join(bad, "; "))
			return
		}
		c.emit("actor.state", "na", noState+" (checked: GET …/state/count and POST …/state 500 ERR_ACTOR_RUNTIME_NOT_FOUND; the actor's SetCount fails)")
		return
	}
	c.run("actor.state", func() (string, error) {
		for _, n := range []int{7, 8} {
			if got, err := s1.SetCount(ctx, n); err != nil || got != n {
				return "", fmt.Errorf("SetCount(%d): %d %v", n, got, err)
			}
			if got, err := s1.GetCount(ctx); err != nil || got != n {
				return "", fmt.Errorf("GetCount after SetCount(%d): %d %v", n, got, err)
			}
		}
		if code, body, err := c.httpState("s1", "count"); err != nil || code != 200 || string(body) != "8" {
			return "", fmt.Errorf("sidecar GET …/state/count: %d %q %v, want 200 \"8\"", code, body, err)
		}
		seeded := map[string]any{"n": 5.0, "s": "h\u00e9llo \u2713", "l": []any{1.0, 2.0}}
		if code, body, err := c.httpStateTx("s1", upsert("seeded", seeded)); err != nil || code != 204 {
			return "", fmt.Errorf("sidecar POST …/state: %d %q %v", code, body, err)
		}
		got, err := s1.GetSeeded(ctx)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(seeded) {
			return "", fmt.Errorf("GetSeeded: %v %v, want %v", got, err, seeded)
		}
		if ok, err := s1.RemoveCount(ctx); err != nil || !ok {
			return "", fmt.Errorf("RemoveCount: %v %v", ok, err)
		}
		if got, err := s1.GetCount(ctx); err != nil || got != -1 {
			return "", fmt.Errorf("GetCount after RemoveCount: %d %v, want -1", got, err)
		}
		if code, body, err := c.httpState("s1", "count"); err != nil || code != 204 || len(body) != 0 {
			return "", fmt.Errorf("sidecar GET …/state/count after removal: %d %q %v, want 204", code, body, err)
		}
		return "ImplActorClientStub SetCount 7, 8 / GetCount / RemoveCount: the actor's GetStateManager() Set+Save, " +
			"Contains+Get, Remove (saved by the SDK after the method); sidecar GET …/state/count = 8 as the SDK " +
			"serialized it, 204 after removal; a value POSTed over the sidecar read back by Get (gRPC GetActorState)", nil
	})
}
