package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The print of an answer is the same however its bytes arrive, and tells a response of another
// size or other ends from it.
func TestAnswerPrint(t *testing.T) {
	answer := `{"data":{"patients":[` + strings.Repeat(`{"sk_patient":1,"age":42},`, 100) + `{"sk_patient":2}]}}`
	print := func(s string, chunk int) *answerPrint {
		a := &answerPrint{}
		for len(s) > 0 {
			n := min(chunk, len(s))
			_, _ = a.Write([]byte(s[:n]))
			s = s[n:]
		}
		return a
	}
	want := print(answer, len(answer))
	for _, chunk := range []int{1, 7, 63, 64, 65, 1000} {
		if err := want.differs(print(answer, chunk)); err != nil {
			t.Errorf("chunks of %d: %v", chunk, err)
		}
	}
	if string(want.head) != answer[:printEnds] || string(want.tail) != answer[len(answer)-printEnds:] {
		t.Errorf("ends %q ... %q", want.head, want.tail)
	}
	for name, other := range map[string]string{
		"errors first":  `{"errors":[{"message":"x"}],"data":null` + answer[39:],
		"errors last":   answer[:len(answer)-30] + `],"errors":[{"message":"x"}]}`,
		"shorter":       answer[:len(answer)-1],
		"same size":     answer[:len(answer)/2] + strings.Replace(answer[len(answer)/2:], `"age":42`, `"age":43`, 1),
		"same size end": answer[:len(answer)-3] + `]}]`,
	} {
		err := want.differs(print(other, 5))
		if name == "same size" { // the middle is not looked at: what the check trades for its cost
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no difference found", name)
		}
	}
}

// A measured response that is not the checked answer fails its request, and a line with a
// failed request fails the run.
func TestServiceRequestChecked(t *testing.T) {
	answer := `{"data":{"records_count":{"count":42}}}`
	var reply atomic.Value
	reply.Store(answer)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, reply.Load().(string))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	svc := &service{host: host, rc: &rawClient{addr: host}, key: "k"}
	defer svc.rc.close()
	want := &answerPrint{}
	_, _ = want.Write([]byte(answer))
	w, _ := workloadByName("records_count")
	do := svc.serviceRequest(w, want, &cacheTally{})
	ctx := context.Background()
	if m := closedLoop(ctx, 1, 20*time.Millisecond, do); m.Errors != 0 || m.Requests == 0 || checked(w, 1, "cold", m) != nil {
		t.Fatalf("the checked answer: %d errors (%v), %d requests", m.Errors, m.FirstErr, m.Requests)
	}
	for _, bad := range []string{
		`{"data":{"records_count":{"count":4}}}`,
		`{"errors":[{"message":"x"}],"data":null}`,
		`{"data":{"records_count":{"count":42}},"errors":[]}`,
	} {
		reply.Store(bad)
		m := closedLoop(ctx, 1, 20*time.Millisecond, do)
		if m.Errors == 0 || m.Requests != 0 {
			t.Errorf("%s: %d errors, %d requests", bad, m.Errors, m.Requests)
		}
		if err := checked(w, 1, "cold", m); err == nil || !strings.Contains(err.Error(), "failed their check") {
			t.Errorf("%s: checked = %v", bad, err)
		}
	}
}
