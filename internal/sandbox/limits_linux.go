package sandbox

const rlimitNproc = 6 // RLIMIT_NPROC
