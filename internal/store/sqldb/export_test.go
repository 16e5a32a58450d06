package sqldb

// For the replica tests, which end the sessions holding given locks.
var (
	LockSpaceLeader = lockSpaceLeader
	LockSpaceHold   = lockSpaceHold
	LockKey         = lockKey
)

// LeaderKey is the second key of r's leader lock.
func (r *Replica) LeaderKey() int32 { return r.leader }
