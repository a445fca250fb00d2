package graphiql

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
)

func render(t *testing.T, p Page) (*httptest.ResponseRecorder, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/prefix/serve/graphql", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, body %q", rec.Code, rec.Body.String())
	}
	return rec, rec.Body.String()
}

var (
	attrRe    = regexp.MustCompile(`\b(src|href)="([^"]*)"`)
	scriptRe  = regexp.MustCompile(`(?i)<script\b[^>]*>`)
	dataAttrs = regexp.MustCompile(`\bdata-(endpoint|header-name)="([^"]*)"`)
)

// assetRefs returns the src/href values of the page, HTML-unescaped.
func assetRefs(body string) []string {
	var refs []string
	for _, m := range attrRe.FindAllStringSubmatch(body, -1) {
		refs = append(refs, html.UnescapeString(m[2]))
	}
	return refs
}

func TestPageCarriesEndpointHeaderAndPrefixedAssets(t *testing.T) {
	rec, body := render(t, Page{
		Title:      "emsquery: /serve/graphql",
		Endpoint:   "/prefix/serve/graphql",
		AssetsPath: "/prefix/graphiql/",
		HeaderName: "x-api-key",
	})
	h := rec.Header()
	if got := h.Get("Content-Type"); got != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", got)
	}
	if got := h.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q", got)
	}
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self';", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-eval") || strings.Contains(csp, "http") {
		t.Errorf("CSP too loose: %q", csp)
	}
	if !strings.Contains(h.Get("Vary"), "Accept") {
		t.Errorf("Vary %q lacks Accept", h.Get("Vary"))
	}

	attrs := map[string]string{}
	for _, m := range dataAttrs.FindAllStringSubmatch(body, -1) {
		attrs[m[1]] = html.UnescapeString(m[2])
	}
	if attrs["endpoint"] != "/prefix/serve/graphql" || attrs["header-name"] != "x-api-key" {
		t.Errorf("data attributes %v", attrs)
	}
	if !strings.Contains(body, "<title>emsquery: /serve/graphql</title>") {
		t.Errorf("title missing:\n%s", body)
	}

	refs := assetRefs(body)
	if len(refs) != 7 { // favicon, 2 stylesheets, 4 scripts
		t.Errorf("got %d src/href attributes, want 7: %v", len(refs), refs)
	}
	for _, ref := range refs {
		if ref == "data:," {
			continue // the empty favicon, so the browser does not ask the service for one
		}
		if !strings.HasPrefix(ref, "/prefix/graphiql/") || strings.Contains(ref, "//graphiql") {
			t.Errorf("asset %q not under the prefixed assets path", ref)
		}
	}
}

// Nothing on the page may point off the service: sites are closed networks.
func TestPageLoadsNothingFromOutside(t *testing.T) {
	_, body := render(t, Page{Endpoint: "/graphql", AssetsPath: "/graphiql", HeaderName: "x-api-key"})
	for _, ref := range assetRefs(body) {
		if strings.Contains(ref, "://") || strings.HasPrefix(ref, "//") {
			t.Errorf("page references %q", ref)
		}
	}
	if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
		t.Errorf("page mentions an absolute URL:\n%s", body)
	}
	if strings.Contains(body, "<style") || strings.Contains(body, " style=") {
		t.Errorf("page has inline style; its CSS belongs in static/")
	}
	for _, tag := range scriptRe.FindAllString(body, -1) {
		if !strings.Contains(tag, ` src="/graphiql/`) {
			t.Errorf("inline or foreign script tag %q (the CSP allows only 'self' scripts)", tag)
		}
	}
}

func TestPageEscapesHostileValues(t *testing.T) {
	p := Page{
		Title:      `</title><script>alert(1)</script>`,
		Endpoint:   `/graphql" onmouseover="alert(2)`,
		AssetsPath: `/graphiql`,
		HeaderName: `x"><script>alert(3)</script>{"a":"'b'"}`,
	}
	_, body := render(t, p)
	if strings.Contains(body, "alert(1)</script>") || strings.Contains(body, "<script>alert") {
		t.Errorf("hostile value reached the page unescaped:\n%s", body)
	}
	if n := len(scriptRe.FindAllString(body, -1)); n != 4 {
		t.Errorf("%d script tags, want the 4 asset scripts:\n%s", n, body)
	}
	if !strings.Contains(body, "<title>&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;</title>") {
		t.Errorf("title not escaped as text:\n%s", body)
	}
	// The attribute values must come back exactly, so the page's script sees the real header
	// name (and builds the headers JSON from it with JSON.stringify).
	got := map[string]string{}
	for _, m := range dataAttrs.FindAllStringSubmatch(body, -1) {
		got[m[1]] = html.UnescapeString(m[2])
	}
	if got["endpoint"] != p.Endpoint || got["header-name"] != p.HeaderName {
		t.Errorf("data attributes do not round-trip: %#v", got)
	}
}

func TestPageDefaultsTitle(t *testing.T) {
	_, body := render(t, Page{Endpoint: "/graphql", AssetsPath: "/graphiql"})
	if !strings.Contains(body, "<title>GraphiQL</title>") {
		t.Errorf("no default title:\n%s", body)
	}
}

func get(t *testing.T, target string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	Assets().ServeHTTP(rec, req)
	return rec
}

// Every asset the page references is served, with its content type and a long cache lifetime.
func TestAssetsServePageReferences(t *testing.T) {
	_, body := render(t, Page{Endpoint: "/p/graphql", AssetsPath: "/p/graphiql", HeaderName: "x-api-key"})
	for _, ref := range assetRefs(body) {
		if ref == "data:," {
			continue
		}
		rec := get(t, ref, nil)
		if rec.Code != http.StatusOK {
			t.Errorf("%s: status %d", ref, rec.Code)
			continue
		}
		want := "text/javascript; charset=utf-8"
		if strings.Contains(ref, ".css?") {
			want = "text/css; charset=utf-8"
		}
		if got := rec.Header().Get("Content-Type"); got != want {
			t.Errorf("%s: Content-Type %q, want %q", ref, got, want)
		}
		if got := rec.Header().Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
			t.Errorf("%s: Cache-Control %q", ref, got)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("ETag") == "" {
			t.Errorf("%s: headers %v", ref, rec.Header())
		}
		if rec.Body.Len() == 0 {
			t.Errorf("%s: empty body", ref)
		}
	}
}

func TestAssetsHTTPBehaviour(t *testing.T) {
	raw, err := os.ReadFile("assets/dist/graphiql.min.js")
	if err != nil {
		t.Fatal(err)
	}

	plain := get(t, "/anywhere/graphiql.min.js", nil)
	if plain.Code != http.StatusOK || !bytes.Equal(plain.Body.Bytes(), raw) || plain.Header().Get("Content-Encoding") != "" {
		t.Fatalf("plain: status %d, %d bytes, encoding %q", plain.Code, plain.Body.Len(), plain.Header().Get("Content-Encoding"))
	}
	// Without the current ?v= the browser must revalidate: the URL is not versioned.
	if got := plain.Header().Get("Cache-Control"); got != "no-cache" {
		t.Errorf("unversioned Cache-Control %q", got)
	}

	gz := get(t, "/graphiql/graphiql.min.js", map[string]string{"Accept-Encoding": "br, gzip;q=0.8"})
	if gz.Header().Get("Content-Encoding") != "gzip" || !strings.Contains(gz.Header().Get("Vary"), "Accept-Encoding") {
		t.Fatalf("gzip: headers %v", gz.Header())
	}
	if gz.Body.Len() >= len(raw)/2 {
		t.Errorf("gzip body %d bytes for %d raw", gz.Body.Len(), len(raw))
	}
	zr, err := gzip.NewReader(gz.Body)
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(unzipped, raw) {
		t.Errorf("gzip body does not decompress to the file (err %v)", err)
	}
	if gz.Header().Get("ETag") == plain.Header().Get("ETag") {
		t.Errorf("same ETag %s for gzip and identity", gz.Header().Get("ETag"))
	}

	if rec := get(t, "/graphiql/graphiql.min.js", map[string]string{"Accept-Encoding": "gzip;q=0"}); rec.Header().Get("Content-Encoding") != "" {
		t.Errorf("gzip;q=0 still got gzip")
	}
	if rec := get(t, "/graphiql/graphiql.min.js", map[string]string{"If-None-Match": plain.Header().Get("ETag")}); rec.Code != http.StatusNotModified {
		t.Errorf("If-None-Match: status %d, want 304", rec.Code)
	}
	if rec := get(t, "/graphiql/graphiql.LICENSE.txt", nil); rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/plain; charset=utf-8" || !strings.Contains(rec.Body.String(), "MIT License") {
		t.Errorf("licence: status %d, type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	for _, missing := range []string{"/graphiql/", "/graphiql/nope.js", "/graphiql/SHA256SUMS", "/graphiql/package.json", "/graphiql/page.html.tmpl"} {
		if rec := get(t, missing, nil); rec.Code != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", missing, rec.Code)
		}
	}

	head := httptest.NewRecorder()
	Assets().ServeHTTP(head, httptest.NewRequest(http.MethodHead, "/graphiql/react.production.min.js", nil))
	if head.Code != http.StatusOK || head.Body.Len() != 0 {
		t.Errorf("HEAD: status %d, %d body bytes", head.Code, head.Body.Len())
	}
	post := httptest.NewRecorder()
	Assets().ServeHTTP(post, httptest.NewRequest(http.MethodPost, "/graphiql/react.production.min.js", nil))
	if post.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d, want 405", post.Code)
	}
}

func TestWantsPage(t *testing.T) {
	cases := []struct {
		method, accept string
		want           bool
	}{
		{http.MethodGet, "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", true}, // a browser
		{http.MethodGet, "TEXT/HTML", true},
		{http.MethodGet, "application/json", false},
		{http.MethodGet, "application/graphql-response+json, application/json", false},
		{http.MethodGet, "", false},
		{http.MethodGet, "*/*", false}, // curl: keep GraphQL-over-GET working
		{http.MethodPost, "text/html", false},
		{http.MethodHead, "text/html", false},
	}
	for _, c := range cases {
		r := httptest.NewRequest(c.method, "/graphql", nil)
		if c.accept != "" {
			r.Header.Set("Accept", c.accept)
		}
		if got := WantsPage(r); got != c.want {
			t.Errorf("%s Accept %q: %v, want %v", c.method, c.accept, got, c.want)
		}
	}
}

// dist/ must be exactly what scripts/update-graphiql.sh produced: a hand edit (or a file added
// without the script's network check) fails here.
func TestDistMatchesChecksums(t *testing.T) {
	f, err := os.Open("assets/dist/SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("bad SHA256SUMS line %q", sc.Text())
		}
		body, err := files.ReadFile("assets/dist/" + name)
		if err != nil {
			t.Errorf("%s listed but not embedded: %v", name, err)
			continue
		}
		got := sha256.Sum256(body)
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s does not match SHA256SUMS: rerun scripts/update-graphiql.sh", name)
		}
		listed[name] = true
	}
	entries, err := files.ReadDir("assets/dist")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !listed[e.Name()] {
			t.Errorf("embedded %s is not in SHA256SUMS", e.Name())
		}
	}
}

// The same check as scripts/update-graphiql.sh, so that a change to static/ or dist/ cannot
// bring in a remote font, stylesheet or script.
func TestAssetsFetchNothingRemote(t *testing.T) {
	cssURL := regexp.MustCompile(`(?i)url\(\s*["']?([^"')\s]{0,16})`)
	host := regexp.MustCompile(`https?://([A-Za-z0-9.-]+)`)
	// Hosts that occur in the bundles only as text: XML namespaces, links in docs and errors.
	textOnly := map[string]bool{"www.w3.org": true, "github.com": true, "en.wikipedia.org": true,
		"commonmark.org": true, "codemirror.net": true, "reactjs.org": true}
	for name := range loadAssets() {
		body := string(loadAssets()[name].body)
		switch {
		case strings.HasSuffix(name, ".css"):
			if strings.Contains(strings.ToLower(body), "@import") {
				t.Errorf("%s: @import", name)
			}
			for _, m := range cssURL.FindAllStringSubmatch(body, -1) {
				if !strings.HasPrefix(strings.ToLower(m[1]), "data:") {
					t.Errorf("%s: url(%s...) is not inline", name, m[1])
				}
			}
		case strings.HasSuffix(name, ".js"):
			for _, m := range host.FindAllStringSubmatch(body, -1) {
				if !textOnly[m[1]] {
					t.Errorf("%s: names host %s", name, m[1])
				}
			}
			if strings.Contains(body, "sourceMappingURL") {
				t.Errorf("%s: sourceMappingURL to a map that is not shipped", name)
			}
		}
	}
}

// README.md must name the versions pinned in package.json, so the record stays true.
func TestReadmeNamesPinnedVersions(t *testing.T) {
	raw, err := os.ReadFile("assets/package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct{ Dependencies map[string]string }
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("assets/README.md")
	if err != nil {
		t.Fatal(err)
	}
	exact := regexp.MustCompile(`^\d+\.\d+\.\d+$`)
	for name, version := range pkg.Dependencies {
		if !exact.MatchString(version) {
			t.Errorf("%s pinned to %q, want an exact version", name, version)
		}
		if !strings.Contains(string(readme), "| "+name+" | "+version+" |") {
			t.Errorf("README.md lacks the row \"| %s | %s |\"", name, version)
		}
	}
	for _, name := range []string{"react", "react-dom"} {
		if !strings.Contains(string(loadAssets()[name+".production.min.js"].body), `version="`+pkg.Dependencies[name]) {
			t.Errorf("dist/%s.production.min.js is not version %s", name, pkg.Dependencies[name])
		}
	}
}
