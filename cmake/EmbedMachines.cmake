# Writes OUT: a C++ source holding each machine description (machines/*.json) as a string, so that
# the library and the CLI carry their defaults wherever they run. Run as cmake -P with DIR (the
# machines folder) and OUT.
file(GLOB files ${DIR}/*.json)
list(SORT files)
set(body "")
foreach(file ${files})
  get_filename_component(name ${file} NAME_WE)
  file(READ ${file} text)
  string(APPEND body "    if (target == \"${name}\")\n        return R\"tandem_json(${text})tandem_json\";\n")
endforeach()
file(WRITE ${OUT}.tmp "// Generated from machines/*.json by cmake/EmbedMachines.cmake: do not edit.\n#include <string>\n\nnamespace tandem::detail {\n\nconst char *builtin_machine_json(const std::string &target) {\n${body}    return nullptr;\n}\n\n} // namespace tandem::detail\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
