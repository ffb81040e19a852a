package sandboxinit

const rlimitNproc = 6 // RLIMIT_NPROC
