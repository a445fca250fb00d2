// Package clientaddr tells a request's client address: the connection's peer, or, when the peer
// is a trusted proxy (APP__TRUSTED_PROXIES), the address that proxy names in X-Forwarded-For or
// Forwarded (RFC 7239). Per-address limits and the access log count clients, not the ingress in
// front of them; a header from anyone else is ignored, so a client cannot pick the address it
// is counted as.
package clientaddr

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
)

// Resolver knows the trusted proxies.
type Resolver struct {
	trusted []netip.Prefix
}

// New returns the resolver of the trusted proxies, each an address or a CIDR prefix.
func New(proxies []string) (*Resolver, error) {
	r := &Resolver{}
	for _, p := range proxies {
		p = strings.TrimSpace(p)
		prefix, err := netip.ParsePrefix(p)
		if err != nil {
			addr, aerr := netip.ParseAddr(p)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not an address or a CIDR prefix", p)
			}
			prefix = netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen())
		}
		r.trusted = append(r.trusted, prefix.Masked())
	}
	return r, nil
}

// Trusts says whether addr is a trusted proxy.
func (r *Resolver) Trusts(addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, p := range r.trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// Of is the client address of a request from peer whose X-Forwarded-For header lines are xff
// and Forwarded lines forwarded. From a peer that is not trusted, the peer. From a trusted one,
// the right-most address of X-Forwarded-For (its lines read as one comma-joined list, RFC 9110)
// that is not itself trusted (the left-most when all are), or the same of Forwarded's for=
// when there is no X-Forwarded-For; the peer when neither names one, or when the address to
// take is not an address (an obfuscated identifier, "unknown", garbage).
func (r *Resolver) Of(peer netip.Addr, xff, forwarded [][]byte) netip.Addr {
	peer = peer.Unmap()
	if r == nil || len(r.trusted) == 0 || !r.Trusts(peer) {
		return peer
	}
	var hops []string
	if len(xff) > 0 {
		for _, line := range xff {
			for _, hop := range bytes.Split(line, []byte{','}) {
				hops = append(hops, string(bytes.TrimSpace(hop)))
			}
		}
	} else {
		for _, line := range forwarded {
			hops = append(hops, forwardedFor(line)...)
		}
	}
	for i := len(hops) - 1; i >= 0; i-- {
		addr, ok := parseHop(hops[i])
		if !ok {
			return peer
		}
		if !r.Trusts(addr) || i == 0 {
			return addr
		}
	}
	return peer
}

// forwardedFor is the for= of each element of a Forwarded header line, in order (an element
// without one is skipped).
func forwardedFor(line []byte) []string {
	var out []string
	for _, element := range strings.Split(string(line), ",") {
		for _, pair := range strings.Split(element, ";") {
			name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if ok && strings.EqualFold(strings.TrimSpace(name), "for") {
				out = append(out, strings.Trim(strings.TrimSpace(value), `"`))
			}
		}
	}
	return out
}

// parseHop reads one hop: an address, optionally with a port ("192.0.2.1:4711",
// "[2001:db8::1]:4711", "[2001:db8::1]").
func parseHop(s string) (netip.Addr, bool) {
	if addr, err := netip.ParseAddr(s); err == nil {
		return addr.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if addr, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return addr.Unmap(), true
		}
	}
	return netip.Addr{}, false
}
