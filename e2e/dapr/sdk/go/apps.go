package main

// The two apps of the Go SDK matrix, both written with github.com/dapr/go-sdk as a user would:
//
//   jobs-app   service/grpc with AddJobEventHandler for the matrix's job names (the SDK's
//              service/http has no job handler: its AddJobEventHandler returns "not implemented")
//   actor-app  service/http with RegisterActorImplFactoryContext: the actor type GoSdkActor,
//              a ReminderCallee, with a timer callback method and state methods that keep the
//              actor's state with the SDK's state manager (GetStateManager: Set / Get /
//              Contains / Remove, Save; the SDK also saves after a method with a result)
//
// Every job, reminder and timer the app receives is appended to the events file as one JSON
// line (see events.go), flushed before the SDK answers.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/dapr/go-sdk/actor"
	"github.com/dapr/go-sdk/service/common"
	daprgrpc "github.com/dapr/go-sdk/service/grpc"
	daprhttp "github.com/dapr/go-sdk/service/http"
)

// jobNames are the jobs the client schedules; the Go SDK routes a job event by its name.
var jobNames = []string{"recv", "rep", "ow", "fail-const", "fail-drop"}

func jobsApp(args []string) {
	fs := flag.NewFlagSet("jobs-app", flag.ExitOnError)
	port := fs.Int("port", envInt("SDKM_PORT"), "gRPC port to serve the app on")
	events := fs.String("log", os.Getenv("SDKM_EVENTS"), "events file (JSON lines)")
	_ = fs.Parse(args)
	openEvents(*events)

	s, err := daprgrpc.NewService(fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		log.Fatalf("service/grpc: %v", err)
	}
	for _, name := range jobNames {
		if err := s.AddJobEventHandler(name, onJob); err != nil {
			log.Fatalf("AddJobEventHandler(%s): %v", name, err)
		}
	}
	// The SDK's HTTP service has no job handler: record what it says, for the matrix's note.
	if err := daprhttp.NewService("127.0.0.1:0").AddJobEventHandler("recv", onJob); err != nil {
		log.Printf("service/http AddJobEventHandler: %v", err)
	}
	log.Printf("go jobs app (service/grpc) on 127.0.0.1:%d", *port)
	if err := s.Start(); err != nil {
		log.Fatalf("service/grpc: %v", err)
	}
}

func onJob(_ context.Context, in *common.JobEvent) error {
	record(event{Kind: "job", Name: in.JobType, Data: in.Data})
	if strings.HasPrefix(in.JobType, "fail-") {
		return errors.New("failing on purpose: " + in.JobType)
	}
	return nil
}

// GoSdkActor is the actor type of the Go actor app.
type GoSdkActor struct {
	actor.ServerImplBaseCtx
}

func (a *GoSdkActor) Type() string { return "GoSdkActor" }

// Ping echoes its argument: the matrix's first actor call.
func (a *GoSdkActor) Ping(_ context.Context, arg string) (string, error) {
	record(event{Kind: "method", Actor: a.ID(), Name: "Ping", Text: arg})
	return "pong:" + arg, nil
}

// OnTimer is the callback the client names when it registers the timer.
func (a *GoSdkActor) OnTimer(_ context.Context, arg string) error {
	record(event{Kind: "timer", Actor: a.ID(), Name: "OnTimer", Text: arg})
	return nil
}

// SetCount keeps n under "count" and saves it at once.
func (a *GoSdkActor) SetCount(ctx context.Context, n int) (int, error) {
	sm := a.GetStateManager()
	if err := sm.Set(ctx, "count", n); err != nil {
		return 0, err
	}
	return n, sm.Save(ctx)
}

// GetCount is "count", or -1 when there is none.
func (a *GoSdkActor) GetCount(ctx context.Context) (int, error) {
	sm := a.GetStateManager()
	if ok, err := sm.Contains(ctx, "count"); err != nil || !ok {
		return -1, err
	}
	var n int
	err := sm.Get(ctx, "count", &n)
	return n, err
}

// RemoveCount removes "count"; the SDK saves the removal after the method (it has a result).
func (a *GoSdkActor) RemoveCount(ctx context.Context) (bool, error) {
	sm := a.GetStateManager()
	ok, err := sm.Contains(ctx, "count")
	if err != nil || !ok {
		return false, err
	}
	return true, sm.Remove(ctx, "count")
}

// GetSeeded is "seeded", a value the client wrote over the sidecar: read by the SDK from it.
func (a *GoSdkActor) GetSeeded(ctx context.Context) (map[string]any, error) {
	var v map[string]any
	err := a.GetStateManager().Get(ctx, "seeded", &v)
	return v, err
}

// ReminderCall makes GoSdkActor a ReminderCallee.
func (a *GoSdkActor) ReminderCall(name string, state []byte, dueTime, period string) {
	record(event{Kind: "reminder", Actor: a.ID(), Name: name, Data: state, DueTime: dueTime, Period: period})
}

func actorApp(args []string) {
	fs := flag.NewFlagSet("actor-app", flag.ExitOnError)
	port := fs.Int("port", envInt("SDKM_PORT"), "HTTP port to serve the app on")
	events := fs.String("log", os.Getenv("SDKM_EVENTS"), "events file (JSON lines)")
	_ = fs.Parse(args)
	openEvents(*events)

	s := daprhttp.NewService(fmt.Sprintf("127.0.0.1:%d", *port))
	s.RegisterActorImplFactoryContext(func() actor.ServerContext { return &GoSdkActor{} })
	log.Printf("go actor app (service/http) on 127.0.0.1:%d", *port)
	if err := s.Start(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("service/http: %v", err)
	}
}

func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}
