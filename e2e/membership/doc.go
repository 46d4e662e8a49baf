// Package membership checks core/membership, the group membership through
// which several kmirror daemons share work, against a real Apache Kafka
// group coordinator: the classic JoinGroup/SyncGroup protocol with protocol
// type "kmirror", the cooperative handover of items when members join, leave
// and go silent, and that no item ever has two owners. Its TestMain starts
// one broker (the harness's default version); `make test` runs it as part
// of ./e2e/....
package membership
