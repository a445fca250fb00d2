// Package graphiql serves a GraphiQL page for each GraphQL endpoint, and the page's assets, from
// the binary itself: the sites that run this service are often closed networks, so nothing may be
// fetched from a CDN (contract section 4). The assets are GraphiQL 3's UMD build and React 18's,
// pinned in assets/package.json, copied into assets/dist by scripts/update-graphiql.sh and
// embedded here with go:embed.
//
// It uses net/http only, so that the web framework can mount it through its net/http adaptor:
//
//	page := graphiql.Page{Title: "...", Endpoint: root + "/graphql", AssetsPath: root + "/graphiql", HeaderName: "x-api-key"}
//	if graphiql.WantsPage(r) { page.ServeHTTP(w, r); return }
//	// and, without the API-key check: GET <AssetsPath>/* -> graphiql.Assets()
package graphiql

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
)

// dist holds the vendored third-party files (and their licences); static holds this package's
// own start-up script and style. Both are served flat by Assets, by file name.
//
//go:embed assets/dist/*.js assets/dist/*.css assets/dist/*.txt static/*.js static/*.css
var files embed.FS

//go:embed page.html.tmpl
var pageSource string

var pageTemplate = template.Must(template.New("graphiql").Parse(pageSource))

// ContentSecurityPolicy is sent with the page. Scripts and styles come only from the service
// itself and the page talks only to its own origin (the GraphQL endpoint). GraphiQL needs
// 'unsafe-inline' styles: its popovers and dialogs (Radix UI, react-style-singleton) add <style>
// elements at run time. Fonts and a few images are data: URIs inside graphiql.min.css.
// No 'unsafe-eval' and no inline script are needed.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; " +
	"style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Page renders the GraphiQL page for one endpoint. Build one per endpoint at start-up.
type Page struct {
	// Title is the browser tab's title; "GraphiQL" when empty.
	Title string
	// Endpoint is the full path the page POSTs queries to, APP__ROOT_PATH prefix included
	// (for example "/prefix/serve/graphql").
	Endpoint string
	// AssetsPath is the full path, prefix included, under which Assets() is mounted
	// (for example "/prefix/graphiql"); the page loads "<AssetsPath>/<file>?v=<hash>".
	AssetsPath string
	// HeaderName is the configured API-key header; the headers editor starts as
	// {"<HeaderName>": ""}.
	HeaderName string
}

// view is what the template sees; URL is a method so that a misspelt asset name fails the
// render (and the tests) instead of producing a broken link.
type view struct{ Page }

// URL returns the page-relative URL of an embedded asset. The ?v= content hash lets Assets
// answer with a year-long immutable cache lifetime while an upgrade still reaches browsers.
func (v view) URL(name string) (string, error) {
	a, ok := loadAssets()[name]
	if !ok {
		return "", fmt.Errorf("graphiql: no embedded asset %q", name)
	}
	return strings.TrimSuffix(v.AssetsPath, "/") + "/" + name + "?v=" + a.version, nil
}

// ServeHTTP writes the page. Values are escaped by html/template; the page carries them in
// data- attributes and its script builds the headers JSON with JSON.stringify, so there is no
// inline script for a hostile value to break out of.
func (p Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.Title == "" {
		p.Title = "GraphiQL"
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, view{p}); err != nil {
		// Only a programming error (an unknown asset name) gets here; the tests render the page.
		http.Error(w, "graphiql: cannot render the page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	// The page is tiny and carries configuration; never cache it, so that a changed header name
	// or prefix shows at once. The same URL answers JSON to API clients, hence Vary: Accept.
	h.Set("Cache-Control", "no-store")
	h.Add("Vary", "Accept")
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	_, _ = w.Write(buf.Bytes())
}

// WantsPage reports whether r is a browser asking for a page (GET with text/html in Accept)
// rather than a GraphQL request; API clients send application/json or nothing.
func WantsPage(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(strings.ToLower(v), "text/html") {
			return true
		}
	}
	return false
}

type asset struct {
	contentType string
	version     string // first hex digits of the SHA-256 of body
	body        []byte
	gzipped     []byte // nil when compression does not pay (licence texts)
}

var contentTypes = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
	".txt": "text/plain; charset=utf-8",
}

// loadAssets indexes the embedded files by base name once, on first use: hashing and gzipping
// the ~1.5 MB of JavaScript and CSS takes tens of milliseconds, which a service that never
// serves the page should not pay at start-up. Gzip shrinks what a browser downloads about
// fourfold, which matters on the slow links of small sites.
var loadAssets = sync.OnceValue(func() map[string]*asset {
	m := map[string]*asset{}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		name := path.Base(p)
		if _, dup := m[name]; dup {
			return fmt.Errorf("two embedded assets named %q", name)
		}
		ct, ok := contentTypes[path.Ext(name)]
		if !ok {
			return fmt.Errorf("no content type for embedded asset %q", name)
		}
		sum := sha256.Sum256(body)
		a := &asset{contentType: ct, version: hex.EncodeToString(sum[:8]), body: body}
		if len(body) > 4096 {
			var z bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
			_, _ = zw.Write(body)
			_ = zw.Close()
			a.gzipped = z.Bytes()
		}
		m[name] = a
		return nil
	})
	if err != nil {
		// The embedded files are fixed at build time and the tests load them: unreachable in a
		// tested build.
		panic("graphiql: " + err.Error())
	}
	return m
})

// Assets serves the embedded files by the last element of the request path, so it works
// wherever it is mounted (with or without the root-path prefix) and the caller need not strip
// anything. Requests carrying the current ?v= hash get a year-long immutable cache lifetime;
// others must revalidate (by ETag). It answers gzip to clients that accept it.
func Assets() http.Handler {
	return http.HandlerFunc(serveAsset)
}

func serveAsset(w http.ResponseWriter, r *http.Request) {
	rep := AssetReply(r.Method, r.URL.Path, r.URL.Query().Get("v"), acceptsGzip(r), r.Header.Get("If-None-Match"))
	for k, v := range rep.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(rep.Status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(rep.Body)
	}
}

// Reply is the answer to a request for an asset. Body is shared with every other request for
// the same asset and must never be written to: a server can send it from where it is instead of
// copying a megabyte per request (the fasthttp adaptor copies every body it is given, so 2,000
// clients asking for the GraphiQL script at once would cost 2 GB).
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// AssetReply answers a request for the asset named by urlPath's last element: method GET or
// HEAD (else 405), v the request's ?v= parameter, gzipOK whether it accepts gzip, ifNoneMatch
// its If-None-Match header (a match is a 304). Requests carrying the current ?v= hash get a
// year-long immutable cache lifetime; others must revalidate (by ETag). Range requests are
// answered with the whole file, which HTTP allows.
func AssetReply(method, urlPath, v string, gzipOK bool, ifNoneMatch string) Reply {
	h := http.Header{}
	if method != http.MethodGet && method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		h.Set("Content-Type", "text/plain; charset=utf-8")
		return Reply{Status: http.StatusMethodNotAllowed, Header: h, Body: []byte("method not allowed\n")}
	}
	a, ok := loadAssets()[path.Base(urlPath)]
	if !ok {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		return Reply{Status: http.StatusNotFound, Header: h, Body: []byte("404 page not found\n")}
	}
	h.Set("Content-Type", a.contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	if v == a.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	body, etag := a.body, `"`+a.version+`"`
	if a.gzipped != nil {
		h.Add("Vary", "Accept-Encoding")
		if gzipOK {
			// A distinct ETag per encoding, as HTTP requires of strong validators.
			body, etag = a.gzipped, `"`+a.version+`-gz"`
			h.Set("Content-Encoding", "gzip")
		}
	}
	h.Set("ETag", etag)
	if etagMatches(ifNoneMatch, etag) {
		return Reply{Status: http.StatusNotModified, Header: h}
	}
	return Reply{Status: http.StatusOK, Header: h, Body: body}
}

// etagMatches says whether an If-None-Match header lists etag (weakly compared) or is "*".
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// AcceptsGzip reports whether Accept-Encoding values list gzip without q=0.
func AcceptsGzip(values ...string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
				continue
			}
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

// acceptsGzip reports whether r's Accept-Encoding lists gzip without q=0.
func acceptsGzip(r *http.Request) bool { return AcceptsGzip(r.Header.Values("Accept-Encoding")...) }
