// Subcommand registry: each src/cli/<name>.cpp defines one top-level subcommand with a
// static ZAYA_COMMAND registrar; main() builds the CLI11 app from the registry. A file
// here parses flags, calls the library and prints: no logic of its own.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace zaya::cli {

struct CommandDef {
  std::string name, help;
  std::function<void(CLI::App&)> setup;  // adds options and a callback to the subcommand
};

std::vector<CommandDef>& registry();

struct Registrar {
  Registrar(std::string name, std::string help, std::function<void(CLI::App&)> setup) {
    registry().push_back({std::move(name), std::move(help), std::move(setup)});
  }
};

}  // namespace zaya::cli

#define ZAYA_CAT2(a, b) a##b
#define ZAYA_CAT(a, b) ZAYA_CAT2(a, b)
#define ZAYA_COMMAND(name, help, setup) \
  static ::zaya::cli::Registrar ZAYA_CAT(zaya_cmd_, __LINE__)(name, help, setup)
