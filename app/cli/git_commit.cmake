# Writes OUT, a header defining SPANSCOPE_GIT_COMMIT as the source tree's commit ("-dirty" when
# tracked files differ from it; "unknown" outside a git checkout), and rewrites it only when
# that changes, so a new commit recompiles the one file that includes it.
# Usage: cmake -DSRC=<source dir> -DOUT=<header> -P git_commit.cmake
execute_process(COMMAND git -C "${SRC}" rev-parse HEAD
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
else()
  execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE changes RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT changes STREQUAL "")
    set(commit "${commit}-dirty")
  endif()
endif()
set(text "#pragma once\n#define SPANSCOPE_GIT_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
