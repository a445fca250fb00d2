package systemtest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/emsanalytics/emsquery/internal/servicetest"
)

// TestGraphQLOverHTTPAudits runs the MUST audits of graphql-http's serverAudits (GraphQL over
// HTTP conformance) against every GraphQL endpoint, with a fetch that adds the key.
func TestGraphQLOverHTTPAudits(t *testing.T) {
	script := e2eScript(t, "graphql-http-audit.mjs", "graphql-http")
	svc := servicetest.Start(t, servicetest.FixtureDB(t), nil)
	for _, path := range []string{"/graphql", "/serve/graphql", "/lookups/graphql"} {
		t.Run(path, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", script)
			cmd.Env = append(os.Environ(), "GRAPHQL_URL="+svc.URL+path, "API_KEY_HEADER="+svc.Header, "API_KEY="+svc.Key)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), " passed, 0 failed") {
				t.Fatalf("audits failed: %v\n%s", err, out)
			}
			t.Logf("%s", out)
		})
	}
}
