#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "ir/attribute.h"
#include "ir/tensor_type.h"

using namespace gradc::ir;

TEST_CASE("attribute printing is typed and round-trip friendly") {
  CHECK(toString(Attribute{std::int64_t{-3}}) == "-3");
  CHECK(toString(Attribute{1.0}) == "1.0");       // never reads back as an integer
  CHECK(toString(Attribute{1e-5}) == "1e-05");
  CHECK(toString(Attribute{0.1}) == "0.1");       // shortest form that round-trips
  CHECK(toString(Attribute{std::numeric_limits<double>::infinity()}) == "inf");
  CHECK(toString(Attribute{-std::numeric_limits<double>::infinity()}) == "-inf");
  CHECK(toString(Attribute{std::nan("")}) == "nan");
  CHECK(toString(Attribute{true}) == "true");
  CHECK(toString(Attribute{std::string("a\"b\\c\n")}) == "\"a\\\"b\\\\c\\n\"");
  CHECK(toString(Attribute{std::vector<std::int64_t>{16, -1}}) == "[16, -1]");
  CHECK(toString(Attribute{DType::bf16}) == "bf16");
}

TEST_CASE("attribute maps print sorted by key") {
  AttrMap m{{"p", 0.5}, {"dim", std::int64_t{1}}, {"approximate", std::string("tanh")}};
  CHECK(toString(m) == "{approximate = \"tanh\", dim = 1, p = 0.5}");
  CHECK(toString(AttrMap{}) == "");
  CHECK(getInt(m, "dim") == 1);
  CHECK_FALSE(getInt(m, "p").has_value());  // wrong kind is not silently converted
  CHECK(getFloat(m, "p") == 0.5);
}

TEST_CASE("tensor types: numel limits, broadcasting, axes") {
  CHECK(checkedNumel({32, 250, 40000}) == 320'000'000);
  CHECK(TensorType{DType::f32, {32, 250, 40000}}.bytes() == 1'280'000'000);
  CHECK_FALSE(checkedNumel({0}).has_value());
  CHECK_FALSE(checkedNumel({-4}).has_value());
  CHECK_FALSE(checkedNumel({std::int64_t{1} << 40, std::int64_t{1} << 40}).has_value());  // would overflow
  CHECK(checkedNumel({}) == 1);  // a scalar
  CHECK(broadcastShapes({16, 128, 256}, {128, 256}) == Shape{16, 128, 256});
  CHECK(broadcastShapes({4, 1}, {1, 3}) == Shape{4, 3});
  CHECK_FALSE(broadcastShapes({4, 2}, {3}).has_value());
  CHECK(normalizeAxis(-1, 3) == 2);
  CHECK_FALSE(normalizeAxis(3, 3).has_value());
  CHECK(toString(TensorType{DType::i64, {16, 128}}) == "i64[16, 128]");
  CHECK(toString(TensorType{DType::f32, {}}) == "f32[]");
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::boolean})
    CHECK(parseDType(dtypeName(d)) == d);
  CHECK(dtypeSize(DType::bf16) == 2);
}
