package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/emsanalytics/emsquery/platform/auth"
)

// keyCommand is `emsquery key new --name NAME --scopes graphql,export [--rate N --burst N]
// [--max-in-flight N] [--max-streams N] [--min-cell K]`: it
// makes a new random key and prints it once, with the entry to add to
// AUTHENTICATION__API_KEYS_FILE (the key's SHA-256, never the key). The key goes to stdout's
// first line and the entry to its second, so that scripts can take them apart; what to do with
// them goes to stderr.
func keyCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "new" {
		fmt.Fprintln(stderr, "usage: emsquery key new --name NAME --scopes graphql,serve,lookups,export [--rate REQUESTS_PER_SECOND] [--burst N] [--max-in-flight N] [--max-streams N] [--min-cell K]")
		return 2
	}
	fs := flag.NewFlagSet("emsquery key new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "the key's name, as logs and metrics show it (letters, digits, . _ -)")
	scopes := fs.String("scopes", "", "comma list of what the key may use: graphql (/graphql), serve (/serve/graphql), lookups (/lookups/graphql), export (the CSV export)")
	rate := fs.Float64("rate", 0, "requests per second the key may make (0: no limit)")
	burst := fs.Int("burst", 0, "requests the key may make at once (default: the rate rounded up)")
	maxInFlight := fs.Int("max-in-flight", 0, "requests of the key running at once (0: no limit)")
	maxStreams := fs.Int("max-streams", 0, "live answers (subscriptions) of the key open at once (0: LIMITS__MAX_STREAMS_PER_KEY)")
	minCell := fs.Int("min-cell", 0, "small-cell threshold of the key's EMS performance measures (0 to 1000; above 1 also confines the key to them)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "emsquery key new: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	list, err := auth.ParseScopes(*scopes)
	if err != nil {
		fmt.Fprintln(stderr, "emsquery key new: --scopes:", err)
		return 2
	}
	key, entry, err := auth.NewKey(auth.Entry{Name: *name, Scopes: list, RatePerSecond: *rate, Burst: *burst, MaxInFlight: *maxInFlight, MaxStreams: *maxStreams, MinCell: *minCell})
	if err != nil {
		fmt.Fprintln(stderr, "emsquery key new:", err)
		return 2
	}
	line, err := json.Marshal(entry)
	if err != nil {
		fmt.Fprintln(stderr, "emsquery key new:", err)
		return 1
	}
	fmt.Fprintln(stdout, key)
	fmt.Fprintln(stdout, string(line))
	fmt.Fprintf(stderr, "The first line is the new key %q: give it to its client now; it is not stored anywhere and cannot be shown again.\n"+
		"The second line is its entry: add it to the JSON list in AUTHENTICATION__API_KEYS_FILE. The service picks it up within a second (or at once on SIGHUP).\n", entry.Name)
	return 0
}
