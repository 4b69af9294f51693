// Linked into the sanitizer build only (make test-asan): dlclose does nothing, so the shared
// objects a library loads and unloads at run time (Open MPI's mca_* components, closed in
// MPI_Finalize) are still mapped when LeakSanitizer reports at exit. Their allocations then
// carry their library's name, which tests/fuzz/lsan.supp can match; unloaded, they show as
// "<unknown module>" and no suppression can name them.
extern "C" int dlclose(void*) { return 0; }
