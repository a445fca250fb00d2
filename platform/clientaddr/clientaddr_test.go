package clientaddr

import (
	"net/netip"
	"testing"
)

func lines(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, l := range s {
		out[i] = []byte(l)
	}
	return out
}

func TestClientAddress(t *testing.T) {
	r, err := New([]string{"10.0.0.0/8", "192.0.2.7", "2001:db8:ffff::/48"})
	if err != nil {
		t.Fatal(err)
	}
	proxy, stranger := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("198.51.100.9")
	for _, tc := range []struct {
		name           string
		peer           netip.Addr
		xff, forwarded [][]byte
		want           string
	}{
		{"no proxy: the peer, headers ignored", stranger, lines("203.0.113.5"), lines("for=203.0.113.6"), "198.51.100.9"},
		{"trusted, no header", proxy, nil, nil, "10.1.2.3"},
		{"one hop", proxy, lines("203.0.113.5"), nil, "203.0.113.5"},
		{"the client's own claim left of the real one", proxy, lines("1.2.3.4, 203.0.113.5"), nil, "203.0.113.5"},
		{"trusted hops skipped", proxy, lines("203.0.113.5, 10.9.9.9, 192.0.2.7"), nil, "203.0.113.5"},
		{"several lines, one list", proxy, lines("1.2.3.4", "203.0.113.5, 10.9.9.9"), nil, "203.0.113.5"},
		{"every hop trusted: the left-most", proxy, lines("10.0.0.1, 10.0.0.2"), nil, "10.0.0.1"},
		{"garbage where the client should be: the peer", proxy, lines("1.2.3.4, nonsense"), nil, "10.1.2.3"},
		{"ports and IPv6", proxy, lines("[2001:db8::1]:4711"), nil, "2001:db8::1"},
		{"mapped IPv4", netip.MustParseAddr("::ffff:10.1.2.3"), lines("::ffff:203.0.113.5"), nil, "203.0.113.5"},
		{"Forwarded", proxy, nil, lines(`for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:cafe::17]:4711"`), "2001:db8:cafe::17"},
		{"Forwarded, trusted hop skipped", proxy, nil, lines(`for=203.0.113.5`, `for=10.2.2.2;proto=https`), "203.0.113.5"},
		{"Forwarded obfuscated: the peer", proxy, nil, lines(`for=_hidden`), "10.1.2.3"},
		{"X-Forwarded-For wins over Forwarded", proxy, lines("203.0.113.5"), lines("for=203.0.113.6"), "203.0.113.5"},
	} {
		if got := r.Of(tc.peer, tc.xff, tc.forwarded); got.String() != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	var none *Resolver
	if got := none.Of(proxy, lines("203.0.113.5"), nil); got != proxy {
		t.Errorf("no resolver: %s", got)
	}
	for _, bad := range []string{"10.0.0.0/33", "example.org", ""} {
		if _, err := New([]string{bad}); err == nil {
			t.Errorf("%q accepted as a proxy", bad)
		}
	}
}
