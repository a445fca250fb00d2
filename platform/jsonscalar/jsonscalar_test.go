package jsonscalar_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/99designs/gqlgen/graphql"

	"github.com/emsanalytics/emsquery/platform/jsonscalar"
)

// gqlgenThenMarshal is what reaches a client through gqlgen: its marshaler's output, then the
// transport's json.Marshal of the response, which compacts and escapes it.
func gqlgenThenMarshal(t *testing.T, m graphql.Marshaler) []byte {
	t.Helper()
	var buf bytes.Buffer
	m.MarshalGQL(&buf)
	out, err := json.Marshal(json.RawMessage(buf.Bytes()))
	if err != nil {
		t.Fatalf("json.Marshal(%q): %v", buf.Bytes(), err)
	}
	return out
}

func TestAppendStringMatchesGqlgen(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", " ", "\"", "\\", "<", ">", "&", "\t", "\n", "\r", "\x00", "\x1f", "\x7f",
		"é", "Ø", "東", "🚑", "\u2028", "\u2029", "\xe2\x80", "\xe2", "\xff", "\xc3", "/", "'"}
	cases := []string{"", "plain", "\xe2\x80\xa8", "\xe2\x80\xa9x", "x\xe2\x80\xaa", "\xe2\x80"}
	for range 20000 {
		var b []byte
		for range rng.IntN(12) {
			b = append(b, alphabet[rng.IntN(len(alphabet))]...)
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		got := jsonscalar.AppendString(nil, s)
		want := gqlgenThenMarshal(t, graphql.MarshalString(s))
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
}

func TestAppendFloatMatchesGqlgen(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cases := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 48.9, 1e-5, 1e-4, 1e20, 1e21, 1e-7, 123456789, 5e-324,
		math.MaxFloat64, math.SmallestNonzeroFloat64, 2.5e6, 1.0 / 3,
		// Around the tenths AppendFloat writes itself.
		0.1, -0.1, 0.09, 0.099999, 0.1 + 0.2, 999999.9, -999999.9, 999999.95, 1e6, -1e6, 1e5, 0.5, 100, -100.5,
		math.Nextafter(0.1, 1), math.Nextafter(72.5, 0), math.Nextafter(1e6, 0)}
	for range 20000 {
		cases = append(cases, math.Float64frombits(rng.Uint64()), float64(rng.IntN(100000))/10, rng.NormFloat64()*1e6,
			float64(rng.IntN(20000000)-10000000)/10, float64(rng.IntN(2000)-1000)/10, float64(rng.IntN(1000)-500)/100)
	}
	for i := -100000; i <= 100000; i++ { // every numeric(5,1)
		cases = append(cases, float64(i)/10)
	}
	for _, f := range cases {
		got, ok := jsonscalar.AppendFloat(nil, f)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			if ok {
				t.Fatalf("AppendFloat(%v) accepted; gqlgen refuses it", f)
			}
			continue
		}
		var buf bytes.Buffer
		if err := graphql.MarshalFloatContext(f).MarshalGQLContext(t.Context(), &buf); err != nil {
			t.Fatal(err)
		}
		if want := buf.String(); !ok || string(got) != want {
			t.Fatalf("AppendFloat(%v) = %s, %v; want %s", f, got, ok, want)
		}
	}
}

// AppendDecimal writes what AppendFloat writes of the float64 strconv.ParseFloat makes of the
// text (the float8 PostgreSQL would have converted the numeric to).
func TestAppendDecimalMatchesAppendFloat(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	cases := []string{"0", "0.0", "-0.0", "0.05", "0.1", "-0.1", "0.10", "0.09", "72.5", "72.50", "100.0",
		"100.00000000000000000000", "99999.9", "999999.9", "-999999.9", "999999.95", "1000000.0", "1000000",
		"123456.7", "00012.5", "-00012.50", "1.", ".5", "-.5", "1e5", "12.3e1", "NaN", "Infinity", "-Infinity",
		"", "-", ".", "abc", "1.2.3", "1,5", "+1.5", "1.5x", "12345678901234567890.1", "0.00001", "1e400", "-1e400"}
	for i := -100000; i <= 100000; i++ { // every numeric(5,1), as PostgreSQL prints it
		cases = append(cases, strconv.FormatFloat(float64(i)/10, 'f', 1, 64))
	}
	for range 50000 {
		var b []byte
		if rng.IntN(2) == 0 {
			b = append(b, '-')
		}
		for range 1 + rng.IntN(9) {
			b = append(b, byte('0'+rng.IntN(10)))
		}
		if rng.IntN(4) > 0 {
			b = append(b, '.')
			for range 1 + rng.IntN(6) {
				b = append(b, byte('0'+rng.IntN(10)))
			}
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		got, ok := jsonscalar.AppendDecimal(nil, []byte(s))
		var want []byte
		wantOK := false
		if f, err := strconv.ParseFloat(s, 64); err == nil || errors.Is(err, strconv.ErrRange) {
			want, wantOK = jsonscalar.AppendFloat(nil, f)
		}
		if ok != wantOK || ok && !bytes.Equal(got, want) {
			t.Fatalf("AppendDecimal(%q) = %s, %v; want %s, %v", s, got, ok, want, wantOK)
		}
	}
}

// BenchmarkAppendDecimal writes weights as the patients list reads them.
func BenchmarkAppendDecimal(b *testing.B) {
	texts := make([][]byte, 4096)
	for i := range texts {
		texts[i] = []byte(strconv.FormatFloat(float64(400+i%900)/10, 'f', 1, 64))
	}
	buf := make([]byte, 0, 64)
	for i := 0; b.Loop(); i++ {
		buf, _ = jsonscalar.AppendDecimal(buf[:0], texts[i%len(texts)])
	}
}
