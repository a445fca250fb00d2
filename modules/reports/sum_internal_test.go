package reports

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/emsanalytics/emsquery/platform/replication/delta"
)

// sumNumeric equals the exact sum of fractions written with the largest scale, on values of
// one scale (numeric(p,s): integers of that scale), of mixed scales, past int64, and negative.
func TestSumNumeric(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	value := func(scale int, big bool) string {
		whole := rng.Int64N(100000)
		if big {
			whole = rng.Int64N(1 << 62)
		}
		v := fmt.Sprint(whole)
		if scale > 0 {
			v += "." + fmt.Sprintf("%0*d", scale, rng.Int64N(int64(pow10(scale))))
		}
		if rng.IntN(4) == 0 {
			v = "-" + v
		}
		return v
	}
	for i := range 500 {
		counts := map[delta.Key]int64{delta.MakeKey(nil): 3}
		mixed, large := i%5 == 1, i%7 == 2
		scale := rng.IntN(4)
		for range 1 + rng.IntN(50) {
			s := scale
			if mixed {
				s = rng.IntN(4)
			}
			v := value(s, large)
			counts[delta.MakeKey(&v)] += 1 + rng.Int64N(1_000_000)
		}
		got, n, err := sumNumeric(counts)
		if err != nil {
			t.Fatal(err)
		}
		var (
			want     big.Rat
			wn       int64
			maxScale int
		)
		for k, c := range counts {
			v := k.Values()[0]
			if v == nil {
				continue
			}
			x, _ := new(big.Rat).SetString(*v)
			want.Add(&want, x.Mul(x, new(big.Rat).SetInt64(c)))
			wn += c
			if _, frac, ok := strings.Cut(*v, "."); ok {
				maxScale = max(maxScale, len(frac))
			}
		}
		if w := want.FloatString(maxScale); got != w || n != wn {
			t.Fatalf("case %d: sum %s of %d values, want %s of %d", i, got, n, w, wn)
		}
	}
	for _, tc := range []struct {
		values []string
		want   string
	}{
		{[]string{"-0.50"}, "-0.50"}, {[]string{"0.25", "-0.25"}, "0.00"}, {[]string{"7"}, "7"}, {[]string{"0.05"}, "0.05"},
	} {
		counts := map[delta.Key]int64{}
		for _, v := range tc.values {
			counts[delta.MakeKey(&v)]++
		}
		if got, _, _ := sumNumeric(counts); got != tc.want {
			t.Errorf("sum of %v = %s, want %s", tc.values, got, tc.want)
		}
	}
}

func pow10(n int) int {
	p := 1
	for range n {
		p *= 10
	}
	return p
}
