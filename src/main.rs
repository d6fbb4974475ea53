fn main() -> std::process::ExitCode {
    spillway::cli::main()
}
