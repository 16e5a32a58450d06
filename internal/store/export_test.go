package store

// For the replica tests, which end the sessions holding given locks.
var (
	LockSpaceLeader = lockSpaceLeader
	LockSpaceHold   = lockSpaceHold
	LockKey         = lockKey
)
