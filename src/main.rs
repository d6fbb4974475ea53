fn main() -> std::process::ExitCode {
    spillway::client::cli::main()
}
