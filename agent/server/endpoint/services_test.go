package endpoint

import (
	"errors"
	"strings"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// serviceAnswer answers a service's entry as Apply does: the service as
// the entry leaves it.
func serviceAnswer(st *fakeState) func(structs.MessageType, any) (any, error) {
	return func(_ structs.MessageType, entry any) (any, error) {
		switch e := entry.(type) {
		case structs.ServiceRegisterRequest:
			svc := e.Service
			return &svc, nil
		case structs.ServiceScaleRequest:
			svc, _ := st.Service(e.Name)
			svc.Replicas = e.Replicas
			return svc, nil
		case structs.ServiceAutoscaleRequest:
			svc, _ := st.Service(e.Name)
			svc.Autoscale = e.Autoscale
			return svc, nil
		case structs.ServiceUpdateRequest:
			svc, _ := st.Service(e.Name)
			svc.Spec = e.Spec
			return svc, nil
		case structs.ServiceDeleteRequest:
			svc, _ := st.Service(e.Name)
			svc.Deleted = true
			return svc, nil
		}
		return nil, errors.New("not a service entry")
	}
}

func webSpec() structs.ServiceSpec {
	return structs.ServiceSpec{Job: structs.JobSpec{Command: []string{"serve"}, Env: map[string]string{"K": "v"}}}
}

// withWeb is a state holding alice's service web of two replicas.
func withWeb() *fakeState {
	st := newFakeState()
	st.services["web"] = &structs.Service{ID: "svc", Name: "web", Owner: "alice", Replicas: 2, Spec: webSpec()}
	return st
}

func TestServices_Create_TheLeaderWritesTheCallersServiceStamped(t *testing.T) {
	st := newFakeState()
	w := &fakeWriter{leads: true, answer: serviceAnswer(st)}
	d, err := Services{State: st}.Create(w, alice, api.ServiceCreateRequest{Name: "web", Replicas: 2, Spec: webSpec()})
	if err != nil {
		t.Fatal(err)
	}
	svc := w.only(t, structs.ServiceRegisterType).(structs.ServiceRegisterRequest).Service
	if svc.Owner != "alice" || svc.ID == "" || svc.CreatedAt.IsZero() || svc.Replicas != 2 {
		t.Errorf("entry %+v, want alice's web of 2 replicas, with an ID and a time", svc)
	}
	if d.Service.Name != "web" || d.Service.Spec.Job.Env["K"] != "v" {
		t.Errorf("answer %+v, want web with its env shown to its owner", d.Service)
	}
}

func TestServices_Create_RefusalsWriteNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		req  api.ServiceCreateRequest
		want error
		says string
	}{
		{"name taken", api.ServiceCreateRequest{Name: "web", Replicas: 1, Spec: webSpec()}, fsm.ErrServiceExists, "service web"},
		{"no name", api.ServiceCreateRequest{Replicas: 1, Spec: webSpec()}, nil, "name"},
		{"a loader variable", api.ServiceCreateRequest{Name: "api", Replicas: 1, Spec: structs.ServiceSpec{Job: structs.JobSpec{
			Command: []string{"serve"}, Env: map[string]string{"LD_PRELOAD": "x.so"}}}}, structs.ErrPermission, "LD_PRELOAD"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &fakeWriter{leads: true}
			_, err := Services{State: withWeb()}.Create(w, alice, c.req)
			if err == nil || !strings.Contains(err.Error(), c.says) || c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("%v, want %v saying %q", err, c.want, c.says)
			}
			w.nothing(t)
		})
	}
}

func TestServices_Owned_AnotherUsersOrNoServiceIsRefused(t *testing.T) {
	s := Services{State: withWeb()}
	if _, err := s.Owned(bob, "web", "scale"); !errors.Is(err, structs.ErrPermission) || !strings.Contains(err.Error(), "scale another user's service") {
		t.Errorf("bob scales alice's web: %v, want a permission refusal saying what", err)
	}
	if _, err := s.Owned(alice, "nope", "scale"); !errors.Is(err, fsm.ErrServiceNotFound) {
		t.Errorf("no service: %v, want fsm.ErrServiceNotFound", err)
	}
	if svc, err := s.Owned(alice, "web", "scale"); err != nil || svc.Name != "web" {
		t.Errorf("alice's own: %v, %v", svc, err)
	}
}

func TestServices_Scale_SaysWhoScaledFromWhatAndRefusesAnAutoscaledService(t *testing.T) {
	st := withWeb()
	w := &fakeWriter{leads: true, answer: serviceAnswer(st)}
	svc, _ := st.Service("web")
	d, err := Services{State: st}.Scale(w, alice, svc, api.ServiceScaleRequest{Replicas: 3})
	if err != nil || d.Service.Replicas != 3 {
		t.Fatalf("scale: %v, %d replicas", err, d.Service.Replicas)
	}
	if e := w.only(t, structs.ServiceScaleType).(structs.ServiceScaleRequest); e.Reason != "scaled 2→3 by alice" || e.At.IsZero() {
		t.Errorf("entry %+v, want the reason saying who scaled from what, stamped", e)
	}

	w = &fakeWriter{leads: true}
	svc.Autoscale = &structs.Autoscale{Min: 1, Max: 4}
	if _, err := (Services{State: st}).Scale(w, alice, svc, api.ServiceScaleRequest{Replicas: 3}); !errors.Is(err, ErrAutoscaled) ||
		!strings.Contains(err.Error(), "skein service autoscale web off") {
		t.Errorf("scale of an autoscaled service: %v, want ErrAutoscaled saying how to turn it off", err)
	}
	svc.Autoscale, svc.Deleted = nil, true
	if _, err := (Services{State: st}).Scale(w, alice, svc, api.ServiceScaleRequest{Replicas: 3}); !errors.Is(err, fsm.ErrServiceDeleted) {
		t.Errorf("scale of a deleted service: %v, want fsm.ErrServiceDeleted", err)
	}
	svc.Deleted = false
	if _, err := (Services{State: st}).Scale(w, alice, svc, api.ServiceScaleRequest{Replicas: -1}); err == nil || !strings.Contains(err.Error(), "replicas") {
		t.Errorf("scale to -1: %v, want an error naming replicas", err)
	}
	w.nothing(t)
}

func TestServices_ElsewhereAWriteIsPassedOnAsItCame(t *testing.T) {
	st := withWeb()
	svc, _ := st.Service("web")
	w := &fakeWriter{}
	if _, err := (Services{State: st}).Scale(w, alice, svc, api.ServiceScaleRequest{Replicas: 3}); !errors.Is(err, ErrForwarded) ||
		len(w.forwarded) != 1 || w.forwarded[0] != "" {
		t.Fatalf("scale on a node that does not lead: %v, forwarded %q", err, w.forwarded)
	}
}

func TestServices_Autoscale_NoneTurnsItOff(t *testing.T) {
	st := withWeb()
	st.services["web"].Autoscale = &structs.Autoscale{Min: 1, Max: 4}
	svc, _ := st.Service("web")
	w := &fakeWriter{leads: true, answer: serviceAnswer(st)}
	d, err := Services{State: st}.Autoscale(w, alice, svc, api.ServiceAutoscaleRequest{})
	if err != nil || d.Service.Autoscale != nil {
		t.Fatalf("autoscale off: %v, %+v", err, d.Service.Autoscale)
	}
	if e := w.only(t, structs.ServiceAutoscaleType).(structs.ServiceAutoscaleRequest); e.Name != "web" || e.Autoscale != nil {
		t.Errorf("entry %+v, want web's autoscaling off", e)
	}
}

func TestServices_UpdateAndDelete_SayWhoAndAreRefusedOnADeletedService(t *testing.T) {
	st := withWeb()
	svc, _ := st.Service("web")
	w := &fakeWriter{leads: true, answer: serviceAnswer(st)}
	spec := webSpec()
	spec.Job.Command = []string{"serve", "--v2"}
	if _, err := (Services{State: st}).Update(w, alice, svc, api.ServiceUpdateRequest{Spec: spec}); err != nil {
		t.Fatal(err)
	}
	if e := w.only(t, structs.ServiceUpdateType).(structs.ServiceUpdateRequest); e.Reason != "by alice" || e.Spec.Job.Command[1] != "--v2" {
		t.Errorf("entry %+v, want the new spec, by alice", e)
	}
	w = &fakeWriter{leads: true, answer: serviceAnswer(st)}
	d, err := Services{State: st}.Delete(w, alice, svc)
	if err != nil || !d.Service.Deleted {
		t.Fatalf("delete: %v, deleted %v", err, d.Service.Deleted)
	}
	if e := w.only(t, structs.ServiceDeleteType).(structs.ServiceDeleteRequest); e.Reason != "by alice" || e.At.IsZero() {
		t.Errorf("entry %+v, want by alice, stamped", e)
	}
	svc.Deleted = true
	w = &fakeWriter{leads: true}
	if _, err := (Services{State: st}).Update(w, alice, svc, api.ServiceUpdateRequest{Spec: spec}); !errors.Is(err, fsm.ErrServiceDeleted) {
		t.Errorf("update of a deleted service: %v, want fsm.ErrServiceDeleted", err)
	}
	w.nothing(t)
}
