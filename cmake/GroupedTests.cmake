# kforge_add_grouped_tests(TARGET LABEL [SLOW SUITE...]): CTest runs TARGET's GoogleTest cases a suite per process
# (a suite of more than KFORGE_TEST_SHARD cases in shards of about that many, through GoogleTest's
# GTEST_TOTAL_SHARDS and GTEST_SHARD_INDEX), instead of gtest_discover_tests' one process per case:
# each process of kforge_tests loads LibTorch (1.4 s on CI's machine), which was half of the suite's
# time at 940 cases. Each group writes GoogleTest's XML report into tests/results/ (scripts/test.sh
# counts the cases, and those skipped with their reasons, from it). The groups are listed after each
# build, by running the program with --gtest_list_tests, as gtest_discover_tests does.
#
# SLOW names suites that take long whatever their number of cases: CTest starts them first.
#
# Run as a script (cmake -P) it does that listing: -DEXE= -DOUT= -DLABEL= -DRESULTS= -DWORKDIR= -DSHARD=
# -DSLOW=.
if(CMAKE_SCRIPT_MODE_FILE)
  cmake_policy(SET CMP0057 NEW)  # if(IN_LIST)
  execute_process(COMMAND "${EXE}" --gtest_list_tests OUTPUT_VARIABLE listing RESULT_VARIABLE rc
                  TIMEOUT 120)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${EXE} --gtest_list_tests failed (${rc}):\n${listing}")
  endif()
  string(REPLACE ";" "\\;" listing "${listing}")
  string(REPLACE "\n" ";" lines "${listing}")
  set(suites "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^([^ #][^ ]*)\\.( .*)?$")  # "Suite." or "Prefix/Suite.  # TypeParam = ..."
      set(suite "${CMAKE_MATCH_1}")
      list(APPEND suites "${suite}")
      set(count_${suite} 0)
    elseif(line MATCHES "^  [^ ]")
      math(EXPR count_${suite} "${count_${suite}} + 1")
    endif()
  endforeach()
  set(text "# Written by cmake/GroupedTests.cmake from ${EXE} --gtest_list_tests\n")
  foreach(suite IN LISTS suites)
    set(n ${count_${suite}})
    math(EXPR shards "(${n} + ${SHARD} - 1) / ${SHARD}")
    string(REPLACE "/" "_" file "${suite}")
    foreach(i RANGE 1 ${shards})
      if(shards EQUAL 1)
        set(name "${suite}")
        set(env "")
      else()
        set(name "${suite} (${i} of ${shards})")
        math(EXPR index "${i} - 1")
        set(env "ENVIRONMENT [==[GTEST_TOTAL_SHARDS=${shards};GTEST_SHARD_INDEX=${index}]==]")
        set(file "${file}-${i}")
      endif()
      # The longer groups first (COST): a long one left for the end would leave the other cores idle.
      math(EXPR cost "(${n} + ${shards} - 1) / ${shards}")
      if("${suite}" IN_LIST SLOW)
        math(EXPR cost "${cost} + 1000")
      endif()
      string(APPEND text
             "add_test([==[${name}]==] [==[${EXE}]==] [==[--gtest_filter=${suite}.*]==] "
             "[==[--gtest_output=xml:${RESULTS}/${file}.xml]==])\n"
             "set_tests_properties([==[${name}]==] PROPERTIES LABELS ${LABEL} COST ${cost} "
             "WORKING_DIRECTORY [==[${WORKDIR}]==] ${env})\n")
    endforeach()
  endforeach()
  file(WRITE "${OUT}" "${text}")
  return()
endif()

set(KFORGE_TEST_SHARD 20 CACHE STRING "Cases per CTest test when a GoogleTest suite is split")

function(kforge_add_grouped_tests target label)
  cmake_parse_arguments(ARG "" "" "SLOW" ${ARGN})
  set(out "${CMAKE_CURRENT_BINARY_DIR}/${target}_groups.cmake")
  add_custom_command(
    TARGET ${target} POST_BUILD
    COMMAND "${CMAKE_COMMAND}" -DEXE=$<TARGET_FILE:${target}> -DOUT=${out} -DLABEL=${label}
            -DRESULTS=${CMAKE_CURRENT_BINARY_DIR}/results
            -DWORKDIR=${CMAKE_CURRENT_BINARY_DIR} -DSHARD=${KFORGE_TEST_SHARD}
            "-DSLOW=${ARG_SLOW}"
            -P "${PROJECT_SOURCE_DIR}/cmake/GroupedTests.cmake"
    VERBATIM)
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${out}")
endfunction()
