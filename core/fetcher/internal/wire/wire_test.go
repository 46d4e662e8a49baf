package wire

import "testing"

// FetcherID must agree with Kafka's AbstractFetcherManager.getFetcherId:
// Utils.abs(31 * topic.hashCode() + partition) % n.
func TestFetcherIDMatchesKafka(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		topic     string
		partition int32
		n         int
		want      int
	}{
		// "a".hashCode() = 97: 31*97+0 = 3007.
		{"a", 0, 3, 3007 % 3},
		{"a", 5, 4, 3012 % 4},
		// "hello".hashCode() = 99162322: 31*99162322+1 overflows to -1220935313.
		{"hello", 1, 7, 1220935313 % 7},
		// "polygenelubricants".hashCode() = MinInt32; 31*MinInt32 wraps to
		// MinInt32, whose Utils.abs is 0.
		{"polygenelubricants", 0, 5, 0},
		// Non-ASCII: Java hashes UTF-16 code units; "é" = 0xE9 = 233,
		// "😀" = D83D DE00: (233*31+0xD83D)*31+0xDE00.
		{"é😀", 0, 1000, ((233*31+0xD83D)*31 + 0xDE00) * 31 % 1000},
		{"anything", 9, 1, 0},
	} {
		if got := FetcherID(tc.topic, tc.partition, tc.n); got != tc.want {
			t.Errorf("FetcherID(%q, %d, %d) = %d, want %d", tc.topic, tc.partition, tc.n, got, tc.want)
		}
	}
}
